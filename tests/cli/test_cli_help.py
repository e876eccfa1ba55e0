"""Every command documents itself with examples and exit codes; usage errors exit 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tracepass.collector.app.cli.main import app

runner = CliRunner()

COMMANDS = [
    ["conversations"],
    ["inspect"],
    ["evaluate"],
    ["compare"],
    ["references"],
    ["references", "validate"],
    ["references", "import"],
    ["references", "show"],
    ["references", "candidates"],
    ["references", "approve"],
    ["review"],
    ["review", "export"],
    ["review", "import"],
    ["serve"],
    ["demo"],
    ["probe"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_help_has_examples(command: list[str]) -> None:
    res = runner.invoke(app, [*command, "--help"])
    assert res.exit_code == 0, res.output
    assert "Examples" in res.stdout
    assert f"tracepass {command[0]}" in res.stdout


@pytest.mark.parametrize(
    "command", [c for c in COMMANDS if c not in (["references"], ["review"])], ids=" ".join
)
def test_help_states_exit_codes(command: list[str]) -> None:
    res = runner.invoke(app, [*command, "--help"])
    assert "Exit codes" in res.stdout


def test_top_level_help_lists_every_command() -> None:
    res = runner.invoke(app, ["--help"])
    assert res.exit_code == 0, res.output
    for command in {c[0] for c in COMMANDS}:
        assert command in res.stdout


@pytest.mark.parametrize("command", [c for c in COMMANDS if len(c) == 2 or c[0] not in ("references", "review")], ids=" ".join)  # fmt: skip
def test_unknown_option_is_a_usage_error(command: list[str]) -> None:
    res = runner.invoke(app, [*command, "--no-such-option"])
    assert res.exit_code == 2
    assert "--no-such-option" in res.output


def test_unknown_command_is_a_usage_error() -> None:
    res = runner.invoke(app, ["evaluat"])
    assert res.exit_code == 2
    assert "No such command 'evaluat'" in res.output


@pytest.mark.slow  # starts a process or a server
def test_help_does_not_load_heavy_libraries() -> None:
    """`tracepass --help` must start fast: the evaluator's models, scipy, numpy,
    matplotlib, langchain-core, protobuf and the OTel SDK load only in the command that
    uses them. Checked on the module set (in a fresh interpreter), not on wall time."""
    heavy = (
        "pydantic", "scipy", "numpy", "matplotlib", "langchain_core", "rapidfuzz",
        "google.protobuf", "opentelemetry.sdk", "grpc", "aiohttp", "jinja2",
        "tracepass.evaluator.models",
    )  # fmt: skip
    code = (
        "import sys\n"
        "from tracepass.collector.app.cli.main import app\n"
        "sys.argv = ['tracepass', '--help']\n"
        "try:\n    app()\nexcept SystemExit:\n    pass\n"
        f"print(sorted(m for m in {heavy!r} if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_docs_cli_md_documents_every_command_and_flag() -> None:
    from typer.main import get_command

    docs = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text(encoding="utf-8")
    missing = []

    def walk(command: Any, path: list[str]) -> None:
        subcommands = getattr(command, "commands", None)
        if subcommands:
            for name, sub in subcommands.items():
                walk(sub, [*path, name])
            return
        if f"tracepass {' '.join(path)}" not in docs and f"`{path[-1]} " not in docs:
            missing.append(" ".join(path))
        for param in command.params:
            for opt in [*param.opts, *getattr(param, "secondary_opts", [])]:
                if opt.startswith("-") and opt != "--help" and opt not in docs:
                    missing.append(f"{' '.join(path)} {opt}")

    walk(get_command(app), [])
    assert missing == []


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_entry_point_builds_only_the_named_branch_with_the_same_help(
    command: list[str],
) -> None:
    """`main()` builds only the command its first argument names (`build_cli(args)`);
    the help and usage errors read exactly as from the whole tree."""
    from tracepass.collector.app.cli.main import app_for, build_cli

    assert sorted(build_cli(command).commands) == [command[0]]
    branch = app_for(command)
    for args in ([*command, "--help"], [*command, "--no-such-option"]):
        got, want = runner.invoke(branch, args), runner.invoke(app, args)
        assert (got.exit_code, got.output) == (want.exit_code, want.output)
    # with build_cli's polish (metavars, epilogs) too
    polished = build_cli(command).get_command(None, command[0])
    whole = build_cli().get_command(None, command[0])
    assert [p.metavar for p in polished.params] == [p.metavar for p in whole.params]
    assert polished.epilog == whole.epilog


@pytest.mark.parametrize("args", [[], ["--help"], ["--version"], ["evaluat"]], ids=repr)
def test_entry_point_builds_the_whole_tree_otherwise(args: list[str]) -> None:
    from tracepass.collector.app.cli.main import app_for, build_cli

    assert app_for(args) is app
    tree = build_cli(args)
    assert "evaluate" in tree.commands
    assert "serve" in tree.commands
    res = runner.invoke(app_for(args), args)
    assert res.exit_code == (2 if args in ([], ["evaluat"]) else 0), res.output
