"""`--references a b`: several values after one option (evaluate, serve, probe)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from tracepass.collector.app.cli.common import expand_multi_values
from tracepass.collector.app.cli.main import app

runner = CliRunner()
MULTI = ("--references", "-r")
VALUED = {"--references", "-r", "--k", "-o", "--output", "--format"}


@pytest.mark.parametrize(
    ("args", "has_positional", "expected"),
    [
        # evaluate FILE… --references PATH…: values after the FILEs are references.
        (["t.jsonl", "--references", "a", "b"], True,
         ["t.jsonl", "--references", "a", "--references", "b"]),
        (["t.jsonl", "-r", "a", "b", "--k", "1,3", "c"], True,
         ["t.jsonl", "-r", "a", "-r", "b", "--k", "1,3", "c"]),
        # Option first, then a positional: one value, as click reads it.
        (["--references", "a", "t.jsonl"], True, ["--references", "a", "t.jsonl"]),
        # An option value never counts as a positional.
        (["--k", "1,3", "--references", "a", "t.jsonl"], True,
         ["--k", "1,3", "--references", "a", "t.jsonl"]),
        # Commands without positionals (serve, probe): always several values.
        (["--references", "a", "b", "--trials", "3"], False,
         ["--references", "a", "--references", "b", "--trials", "3"]),
        (["--references=a", "b"], False, ["--references=a", "--references", "b"]),
        # `--` ends option processing.
        (["x", "-r", "a", "--", "b"], True, ["x", "-r", "a", "--", "b"]),
        # Repeating still works and values that look like options are kept.
        (["x", "-r", "a", "-r", "b", "-o", "-"], True, ["x", "-r", "a", "-r", "b", "-o", "-"]),
    ],
)  # fmt: skip
def test_expand_multi_values(args: list[str], has_positional: bool, expected: list[str]) -> None:
    got = expand_multi_values(
        args, multi=MULTI, takes_value=VALUED | {"--trials"}, has_positional=has_positional
    )
    assert got == expected


def test_serve_takes_several_reference_paths(tmp_path: Path) -> None:
    ok = tmp_path / "a.yaml"
    ok.write_text("name: a\nreferences: []\n", encoding="utf-8")
    res = runner.invoke(app, ["serve", "--references", str(ok), str(tmp_path / "b.yaml")])
    assert res.exit_code == 2
    assert f"{tmp_path / 'b.yaml'}: no such file or directory (--references)" in res.stderr


def test_probe_takes_several_reference_paths(tmp_path: Path) -> None:
    ok = tmp_path / "a.yaml"
    ok.write_text(
        "name: a\nreferences:\n  - id: x\n    turns:\n      - query: hi\n", encoding="utf-8"
    )
    missing = tmp_path / "b.yaml"
    res = runner.invoke(
        app, ["probe", "--references", str(ok), str(missing), "--agent", "nope:fn", "--trials", "1"]
    )
    assert res.exit_code == 2
    assert f"{missing}: no such file or directory (--references)" in res.stderr
