"""Entry point of the `tracepass` command (subcommands are registered in this package).

Help is click's plain formatter (`rich_markup_mode=None`), polished once in `build_cli`:
it wraps cleanly at 80 columns, every option that takes a value shows a metavar named
after it (`--host HOST`, never typer's `<str>` / `<bool>` type noise) and its default,
and epilogs keep their line breaks (examples stay one per line).
"""

from __future__ import annotations

import copy
import os
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Annotated, Any

import typer

DISTRIBUTIONS = ("tracepass-collector", "tracepass-evaluator", "tracepass-instrumentation")

app = typer.Typer(
    no_args_is_help=True,
    rich_markup_mode=None,
    add_completion=False,
    help="tracepass: evaluate tool-using agents from their traces.",
)


def versions_text() -> str:
    """One line per distribution (`tracepass-collector 0.1.0`), then which evaluation
    core is active (`evaluation core: native (…)` or `python (why)`)."""
    lines = []
    for name in DISTRIBUTIONS:
        try:
            lines.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            lines.append(f"{name} (not installed)")
    from tracepass.evaluator.native_core import core_description

    lines.append(f"evaluation core: {core_description()}")
    return "\n".join(lines)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(versions_text())
        raise typer.Exit(0)


@app.callback()
def _root(
    show_version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_print_version,
            is_eager=True,
            help="Print the versions of the three tracepass distributions and the active evaluation core, and exit.",
        ),
    ] = False,
) -> None:
    """tracepass: evaluate tool-using agents from their traces."""


HELP_WIDTH = 80


def _epilog_block(block: str) -> str:
    """Command examples stay one per line (click re-flows a paragraph unless it starts
    with \\b), broken with shell continuations to fit 80 columns; prose is re-flowed."""
    lines = block.splitlines()
    if not any(line.lstrip().startswith(("tracepass ", "$ ")) for line in lines):
        return block
    out: list[str] = []
    for line in lines:
        out.extend(_wrap_command(line, HELP_WIDTH - 4))
    return "\b\n" + "\n".join(out)


def _wrap_command(line: str, width: int) -> list[str]:
    if len(line) <= width:
        return [line]
    indent = line[: len(line) - len(line.lstrip())]
    words = line.split()
    rows: list[str] = []
    current = indent + words[0]
    for word in words[1:]:
        if len(current) + 1 + len(word) + 2 > width:
            rows.append(current + " \\")
            current = indent + "    " + word
        else:
            current += " " + word
    rows.append(current)
    return rows


def _no_type(ctx: Any = None) -> None:
    return None


def _polish(command: Any) -> None:
    """Metavars named after options, epilog blocks kept verbatim, recursively."""
    for param in getattr(command, "params", ()):
        if param.param_type_name == "argument":
            # typer appends the Python type (`FILES <list[Path]>`); the name says enough.
            param.display_type_rich = _no_type
        if getattr(param, "is_flag", False) or param.metavar is not None:
            continue
        param.metavar = param.name.upper()
    epilog = getattr(command, "epilog", None)
    if epilog and not epilog.startswith("\b"):
        command.epilog = "\n\n".join(_epilog_block(block) for block in epilog.split("\n\n"))
    for sub in getattr(command, "commands", {}).values():
        _polish(sub)


def build_cli(args: Sequence[str] = ()) -> Any:
    """The click command tree of `tracepass`, with polished help.

    Given the command line's arguments, when the first one names a command, only that
    command's branch is built: typer builds every option of every command up front
    (≈ 18 ms, evaluating each command's string annotations), which was most of the CPU
    of a small `tracepass evaluate`. Anything else (`--help`, `--version`, a typo that
    deserves "No such command" with the full list) gets the whole tree."""
    command = typer.main.get_command(app_for(args))
    _polish(command)
    return command


def app_for(args: Sequence[str]) -> typer.Typer:
    """`app`, or `app` with only the command or command group that `args[0]` names."""
    if not args:
        return app
    name = args[0]
    commands = [
        c
        for c in app.registered_commands
        if c.callback is not None
        and (c.name or typer.main.get_command_name(c.callback.__name__)) == name
    ]
    groups = [g for g in app.registered_groups if g.name == name]
    if not commands and not groups:
        return app
    branch = copy.copy(app)  # same callback (--version), settings and help
    branch.registered_commands = commands
    branch.registered_groups = groups
    return branch


class _PipeSafeStdout:
    """stdout that goes quiet when the reader closes the pipe (`... | head -1`):
    the command still finishes and exits with its normal code, with no traceback."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._closed = False

    def write(self, text: str) -> int:
        if self._closed:
            return len(text)
        try:
            return int(self._stream.write(text))
        except BrokenPipeError:
            self._go_quiet()
            return len(text)

    def flush(self) -> None:
        if self._closed:
            return
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._go_quiet()

    def _go_quiet(self) -> None:
        self._closed = True
        # Point the file descriptor at /dev/null so the interpreter's own final flush
        # does not raise again at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, self._stream.fileno())
        os.close(devnull)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def main() -> None:
    sys.stdout = _PipeSafeStdout(sys.stdout)
    build_cli(sys.argv[1:])(prog_name="tracepass")


# Offline workflows: each module registers its commands.
from tracepass.collector.app.cli import (  # noqa: E402
    compare,
    conversations,
    evaluate,
    inspect,
    references,
    review,
)

for _module in (conversations, inspect, evaluate, references, review, compare):
    _module.register(app)

# Live workflows: the collector, the demo, probing an agent.
from tracepass.collector.app.cli import demo as _demo  # noqa: E402
from tracepass.collector.app.cli import probe as _probe  # noqa: E402
from tracepass.collector.app.cli import serve as _serve  # noqa: E402

_serve.register(app)
_demo.register(app)
_probe.register(app)
