"""Issue 21 #10: YAML alias expansion is bounded before anything walks the tree. A
430-byte "billion laughs" reference file (nine levels of nine aliases, ~4e8 nodes when
expanded) took 3.8 GB and 38 s in `strict_yaml.locations()` when the file also had an
error; now it is refused at once, with file:line, before any walk. The real CLI runs
under a 1.5 GB address-space limit, so the unfixed reader fails fast (MemoryError,
exit 1) instead of exhausting the machine."""

from __future__ import annotations

import resource
import subprocess
from pathlib import Path

import pytest
from _serve import TRACEPASS

from tracepass.evaluator.strict_yaml import MAX_ALIAS_EXPANSION, YamlFileError, locations, parse

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def _bomb(levels: int = 9) -> str:
    lines = [
        "name: bomb",
        'version: "1"',
        'l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
    ]
    for i in range(1, levels):
        lines.append(f"l{i}: &l{i} [" + ",".join([f"*l{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


# A reference without `id` (an error, so the loader looks up its line) holding the bomb.
BOMB_WITH_ERROR = _bomb() + "references: [{turns: [{query: q, expected_answer: *l8}]}]\n"
BOMB_VALID = _bomb() + "references: [{id: x, turns: [{query: q, expected_answer: *l8}]}]\n"


def _limit_memory() -> None:
    limit = 1536 * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


@pytest.mark.parametrize("text", [BOMB_WITH_ERROR, BOMB_VALID], ids=["with-error", "valid"])
def test_reference_alias_bomb_is_refused_with_its_line(tmp_path: Path, text: str) -> None:
    refs = tmp_path / "bomb.yaml"
    refs.write_text(text, encoding="utf-8")
    assert len(text.encode()) < 600
    done = subprocess.run(
        [str(TRACEPASS), "references", "validate", str(refs)],
        capture_output=True,
        text=True,
        timeout=240,
        preexec_fn=_limit_memory,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"{refs}:" in done.stderr
    assert "aliases expand to more than" in done.stderr
    assert "Traceback" not in done.stderr


def test_config_alias_bomb_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "tracepass.yaml"
    config.write_text(_bomb() + "receiver: {host: *l8}\n", encoding="utf-8")
    done = subprocess.run(
        [str(TRACEPASS), "serve", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=240,
        preexec_fn=_limit_memory,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"{config}:" in done.stderr
    assert "aliases expand" in done.stderr


def test_ordinary_aliases_still_load() -> None:
    """An anchored block reused a few hundred times is what aliases are for."""
    block = "common: &tools [" + ",".join(f"{{name: t{i}}}" for i in range(20)) + "]\n"
    uses = "".join(f"r{i}: *tools\n" for i in range(300))
    data = parse(block + uses, "ok.yaml")
    assert data["r299"][19] == {"name": "t19"}
    assert ("r299", 19, "name") in locations(block + uses)


def test_bound_is_on_nodes_added_by_aliases() -> None:
    """A big file without aliases is not refused: the bound counts expansion only."""
    text = "".join(f"k{i}: [1, 2, 3]\n" for i in range(MAX_ALIAS_EXPANSION // 3))
    assert len(parse(text, "big.yaml")) == MAX_ALIAS_EXPANSION // 3
    with pytest.raises(YamlFileError) as info:
        parse(_bomb(), "bomb.yaml")
    assert info.value.line is not None
    assert locations(BOMB_WITH_ERROR) == {}
