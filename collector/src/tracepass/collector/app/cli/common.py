"""Shared CLI plumbing: error reporting with exit codes, output writing, JSON loading and
the `--judge module:attr` loader. Commands only parse, call pure modules and print.

Exit codes (every command): 0 success, 1 a gate failed / regression found,
2 usage or input error (bad file, bad reference, bad option value).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, ClassVar, NoReturn

import orjson
import pydantic_core
import typer
from rich.console import Console
from rich.markup import escape
from rich.text import Text
from typer.core import TyperCommand

from tracepass.evaluator.offline.gates import GateOn, GateOutcome

EXIT_GATE = 1
EXIT_INPUT = 2

# Option declarations shared by several commands, so a flag means the same everywhere.
OutputOption = Annotated[
    Path | None, typer.Option("--output", "-o", help="Write to this file, not stdout.")
]
LevelOption = Annotated[
    float, typer.Option("--level", min=0.5, max=0.999, help="Credible interval level.")
]
FailUnderOption = Annotated[
    list[str] | None,
    typer.Option(
        "--fail-under",
        help="Gate METRIC=VALUE (repeatable): pass_at_k@K, pass_pow_k@K, "
        "conversation_correctness, tool_correctness, answer_correctness.",
        show_default=False,
    ),
]
GateOnOption = Annotated[
    GateOn,
    typer.Option("--gate-on", help="Judge gates on the point estimate or the lower bound."),
]
ReadinessGateOption = Annotated[
    bool,
    typer.Option(
        "--readiness-gate/--no-readiness-gate",
        help="Without --fail-under, exit 1 when the readiness verdict at "
        "metrics.headline_k is 'needs improvement' (the alert's condition; "
        "--no-readiness-gate: report only).",
    ),
]
ConversationIdKeyOption = Annotated[
    list[str] | None,
    typer.Option(
        "--conversation-id-key",
        help="Extra span attribute naming the conversation (repeatable).",
        show_default=False,
    ),
]


class OutputFormat(StrEnum):
    TABLE = "table"
    JSON = "json"


TableOrJsonOption = Annotated[
    OutputFormat, typer.Option("--format", help="table (default) or json.")
]
OtlpFilesArgument = Annotated[
    list[Path],
    typer.Argument(
        help="OTLP files: JSON lines as the OpenTelemetry Collector file exporter writes "
        "them (traces, and logs holding GenAI events), single OTLP JSON documents, or "
        "length-prefixed protobuf.",
        show_default=False,
    ),
]


def expand_multi_values(
    args: Sequence[str],
    *,
    multi: Sequence[str],
    takes_value: set[str],
    has_positional: bool,
) -> list[str]:
    """Let ``--references a b`` mean ``--references a --references b``.

    Click options take one value each; the issue spells the form ``--references PATH…``.
    Tokens that follow a ``multi`` option, up to the next option, become further values
    of it. In a command with positional arguments (``evaluate FILE…``) that only happens
    when a positional came *before* the option, so both ``evaluate t.jsonl --references
    a b`` (issue form) and ``evaluate --references a t.jsonl`` (one reference, one file)
    keep their obvious meaning. ``--`` ends option processing as usual.
    """
    out: list[str] = []
    seen_positional = False
    greedy: str | None = None
    i = 0
    while i < len(args):
        token = args[i]
        if token == "--":
            out.extend(args[i:])
            break
        is_option = token.startswith("-") and token != "-"
        if greedy is not None and not is_option:
            out += [greedy, token]
            i += 1
            continue
        greedy = None
        if not is_option:
            seen_positional = True
            out.append(token)
            i += 1
            continue
        name, eq, _value = token.partition("=")
        out.append(token)
        if name in takes_value and not eq and i + 1 < len(args):
            out.append(args[i + 1])  # the option's own value, whatever it looks like
            i += 1
        if name in multi and (seen_positional or not has_positional):
            greedy = name
        i += 1
    return out


class MultiValueCommand(TyperCommand):
    """A command whose ``--references`` / ``-r`` accepts several values in a row
    (see `expand_multi_values`); repeating the option keeps working."""

    multi_value_options: ClassVar[tuple[str, ...]] = ("--references", "-r")

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        takes_value: set[str] = set()
        has_positional = False
        for param in self.params:
            if param.param_type_name == "argument":
                has_positional = True
            elif not getattr(param, "is_flag", False) and not getattr(param, "count", False):
                takes_value.update(param.opts)
        expanded = expand_multi_values(
            args,
            multi=self.multi_value_options,
            takes_value=takes_value,
            has_positional=has_positional,
        )
        return super().parse_args(ctx, expanded)


def stdout_console() -> Console:
    # Created per call so test runners that swap sys.stdout are honoured.
    return Console(file=sys.stdout, soft_wrap=False)


def stderr_console() -> Console:
    # soft_wrap: error messages stay on one line (grep-able, precise in CI logs).
    return Console(file=sys.stderr, stderr=True, soft_wrap=True)


def fail(message: str) -> NoReturn:
    """Report an input/usage error precisely and exit with code 2."""
    console = stderr_console()
    for line in message.splitlines() or [""]:  # several errors: one `error:` line each
        console.print(f"[bold red]error:[/] {escape(line)}", highlight=False)
    raise typer.Exit(EXIT_INPUT)


def write_text(text: str | bytes, output: Path | None) -> None:
    """Write to ``output`` (announced on stderr) or to stdout unchanged (no wrapping).
    Bytes are UTF-8 text already encoded (`dump_json_bytes`), written to a file as is."""
    if output is None:
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        sys.stdout.flush()
        return
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            output.write_bytes(text)
        else:
            output.write_text(text, encoding="utf-8")
    except OSError as exc:
        fail(f"{output}: cannot write: {exc.strerror or exc}")
    stderr_console().print(f"wrote {escape(str(output))}", highlight=False)


def emit_json_or_table(
    data: Any, *, as_json: bool, output: Path | None, print_table: Callable[[], None]
) -> None:
    """The output convention of the commands with a table view: JSON to ``output`` (or
    stdout) when JSON is asked for; otherwise the table on stdout, with the JSON also
    saved to ``output`` when one is named, so a run can be both read and kept."""
    if as_json or output is not None:
        write_text(dump_json(data), output)
    if not as_json:
        print_table()


def dump_json(data: Any, *, default: Callable[[Any], Any] | None = None) -> str:
    """`dump_json_bytes` as text."""
    return dump_json_bytes(data, default=default).decode("utf-8")


def dump_json_bytes(data: Any, *, default: Callable[[Any], Any] | None = None) -> bytes:
    """Every ``--format json`` document: UTF-8, indented by 2, through orjson's compiled
    encoder (`json` falls back to its pure-Python encoder whenever ``indent`` is set,
    which made the `evaluate` report cost 3x the evaluation it reports).

    The document parses to the same data as `json.dumps` wrote (docs/cli.md, "JSON
    output"): floats have the same shortest round-trip digits in another notation
    (``0.0000281``, ``1e-7`` where `json` writes ``2.81e-05``, ``1e-07``); a non-finite
    float (never a score: only a value copied from the input, such as a tool argument)
    is written as null, as the result store writes it, where `json` refused the whole
    document. Integers beyond 64 bits, which orjson refuses, go through pydantic's
    encoder instead (same format).

    `default` turns what orjson cannot write (the `evaluate` report's result models)
    into what it can; datetimes and dataclasses are handed to it too, so they come out
    as pydantic writes them, not in orjson's own forms."""
    try:
        raw = orjson.dumps(data, default=default, option=_ORJSON_OPTIONS)
    except TypeError:  # orjson.JSONEncodeError: an integer beyond 64 bits, or a type it lacks
        plain = data if default is None else _resolve(data, default)
        raw = pydantic_core.to_json(plain, indent=2, inf_nan_mode="null")
    return raw


_ORJSON_OPTIONS = (
    orjson.OPT_INDENT_2
    | orjson.OPT_NON_STR_KEYS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_DATACLASS
)
_JSON_SCALARS = (str, int, float, bool, type(None))


def _resolve(data: Any, default: Callable[[Any], Any]) -> Any:
    """`data` with `default` applied wherever orjson would have called it (the slow
    path, for the rare document orjson refuses)."""
    if isinstance(data, _JSON_SCALARS):
        return data
    if isinstance(data, dict):
        return {k: _resolve(v, default) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [_resolve(v, default) for v in data]
    return _resolve(default(data), default)


def load_json_file(path: Path, what: str) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        fail(f"{path}: no such file ({what})")
    except IsADirectoryError:
        fail(f"{path}: is a directory, expected a file ({what})")
    except OSError as exc:
        fail(f"{path}: cannot read: {exc.strerror or exc}")
    except UnicodeDecodeError as exc:
        fail(f"{path}: not UTF-8 text at byte {exc.start} ({what})")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        fail(f"{path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg} ({what})")


def load_chat_model(spec: str) -> Any:
    """Resolve ``module:attr`` to a langchain-core ``BaseChatModel`` (an instance or a
    zero-argument factory); a bad spec exits 2 with the reason."""
    # Here, not at the top: importing the judge package loads the LLM judge and the data
    # model, which `tracepass --help` must not (tests/cli/test_cli_help.py).
    from tracepass.evaluator.judge.model_loading import JudgeSpecError, resolve_chat_model

    try:
        return resolve_chat_model(spec)
    except JudgeSpecError as exc:
        fail(f"--judge {exc}")


def fmt_num(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def fmt_delta(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "—"
    color = "green" if value > 0 else "red" if value < 0 else "dim"
    return f"[{color}]{value:+.{digits}f}[/]"


def plain(value: object) -> Text:
    """User data in a rich table cell: never interpreted as console markup."""
    return Text("" if value is None else str(value))


def report_gates(outcomes: list[GateOutcome]) -> None:
    """One line per gate on stderr (stdout stays clean for JSON)."""
    if not outcomes:
        return
    console = stderr_console()
    for o in outcomes:
        mark = "[green]PASS[/]" if o.passed else "[red]FAIL[/]"
        console.print(f"gate {mark}: {escape(o.describe())}", highlight=False)
