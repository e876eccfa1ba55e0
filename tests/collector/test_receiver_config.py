"""`tracepass serve`'s config file: docs/configuration.md is the full default config,
field for field, and a bad file is reported with the file and the dotted field path."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from tracepass.collector.config import CollectorConfig, ConfigError, load_config

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def _doc_yaml() -> str:
    match = re.search(r"```yaml\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert match is not None, "docs/configuration.md has no yaml block"
    return match.group(1)


def _fields(model: type[BaseModel], prefix: str = "") -> set[str]:
    out: set[str] = set()
    for name, info in model.model_fields.items():
        path = f"{prefix}{name}"
        out.add(path)
        ann = info.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            out |= _fields(ann, f"{path}.")
    return out


def _keys(doc: Any, prefix: str = "") -> set[str]:
    out: set[str] = set()
    if isinstance(doc, dict):
        for k, v in doc.items():
            out.add(f"{prefix}{k}")
            out |= _keys(v, f"{prefix}{k}.")
    return out


def test_documented_config_is_every_field_with_its_default(tmp_path: Path) -> None:
    text = _doc_yaml()
    documented = _keys(yaml.safe_load(text))
    assert documented == _fields(CollectorConfig)
    f = tmp_path / "tracepass.yaml"
    f.write_text(text, encoding="utf-8")
    loaded = load_config(f)
    # Only the example reference folder differs from the built-in defaults.
    assert loaded.model_copy(update={"references": []}) == CollectorConfig()
    assert loaded.references == [Path("references/")]


def test_no_file_means_defaults() -> None:
    assert load_config(None) == CollectorConfig()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "receiver:\n  grpc_prot: 1\n",
            "receiver.grpc_prot: unknown key; did you mean 'grpc_port'?",
        ),
        (
            "assembly:\n  idle_timeout_s: -1\n",
            "assembly.idle_timeout_s: Input should be greater than 0",
        ),
        (
            "state:\n  durability: sometimes\n",
            "state.durability: Input should be 'none' or 'batch'",
        ),
        ("metrics:\n  windows: [{name: 1h}]\n", "metrics.windows.0.seconds: Field required"),
        ("- a\n- b\n", "top level must be a mapping, got list"),
        ("receiver: [\n", "invalid YAML: "),
    ],
)
def test_errors_name_file_and_field(tmp_path: Path, text: str, message: str) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(f)
    assert re.match(rf"{re.escape(str(f))}:\d+:\d+: ", str(info.value))
    assert message in str(info.value)


def test_every_error_is_reported(tmp_path: Path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text("receiver:\n  grpc_port: 70000\n  http_port: -1\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(f)
    lines = str(info.value).splitlines()
    assert [line.split(": ")[1] for line in lines] == ["receiver.grpc_port", "receiver.http_port"]
    assert [line.split(": ")[0] for line in lines] == [f"{f}:2:3", f"{f}:3:3"]


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"missing\.yaml: cannot read"):
        load_config(tmp_path / "missing.yaml")
