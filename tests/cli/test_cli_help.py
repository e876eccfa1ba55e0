"""Every offline command documents itself with examples and exit codes."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from tracepass.collector.cli.main import app

runner = CliRunner()

COMMANDS = [
    ["conversations"],
    ["evaluate"],
    ["compare"],
    ["references"],
    ["references", "validate"],
    ["references", "import"],
    ["references", "show"],
    ["review"],
    ["review", "export"],
    ["review", "import"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_help_has_examples(command: list[str]) -> None:
    res = runner.invoke(app, [*command, "--help"])
    assert res.exit_code == 0, res.output
    assert "Examples" in res.stdout
    assert f"tracepass {command[0]}" in res.stdout


@pytest.mark.parametrize(
    "command",
    [c for c in COMMANDS if len(c) == 2 or c[0] in ("conversations", "evaluate", "compare")],
    ids=" ".join,
)
def test_help_states_exit_codes(command: list[str]) -> None:
    res = runner.invoke(app, [*command, "--help"])
    assert "Exit codes" in res.stdout


def test_unknown_option_is_a_usage_error() -> None:
    res = runner.invoke(app, ["evaluate", "--no-such-option"])
    assert res.exit_code == 2
