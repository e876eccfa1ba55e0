"""`tracepass conversations FILE…`: rebuild conversations from OTLP files and print them."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer
from rich.table import Table

from tracepass.collector.app.cli.common import (
    ConversationIdKeyOption,
    OtlpFilesArgument,
    OutputFormat,
    OutputOption,
    TableOrJsonOption,
    emit_json_or_table,
    plain,
    stdout_console,
)

if TYPE_CHECKING:
    # Typing only: the evaluator's pydantic models cost most of `tracepass --help`.
    from tracepass.evaluator.models import Conversation

EPILOG = """\
Examples:

  tracepass conversations traces.jsonl

  tracepass conversations traces.jsonl more.pb --format json -o conversations.json

  tracepass conversations export.json --conversation-id-key app.chat_id

Exit codes: 0 ok, 2 unreadable or malformed file.
"""


def register(app: typer.Typer) -> None:
    app.command(epilog=EPILOG)(conversations)


def conversations(
    files: OtlpFilesArgument,
    output_format: TableOrJsonOption = OutputFormat.TABLE,
    output: OutputOption = None,
    conversation_id_key: ConversationIdKeyOption = None,
) -> None:
    """Rebuild the conversations recorded in OTLP trace files.

    Prints turns, queries, answers and tool calls (arguments, results, errors).
    """
    from tracepass.collector.api import conversation_json
    from tracepass.collector.app.cli import sources

    convs = sources.conversations_from_otlp(files, conversation_id_key or ())
    emit_json_or_table(
        {"conversations": [conversation_json(c) for c in convs]},
        as_json=output_format is OutputFormat.JSON,
        output=output,
        print_table=lambda: print_table(convs),
    )


def print_table(convs: list[Conversation]) -> None:
    console = stdout_console()
    table = Table(title=f"{len(convs)} conversation(s)", show_lines=True)
    for col in ("conversation", "agent", "turn", "query", "tool calls", "answer"):
        table.add_column(col, overflow="fold")
    for conv in convs:
        agent = " ".join(x for x in (conv.agent_name, conv.agent_version) if x) or "—"
        if not conv.turns:
            table.add_row(plain(conv.id), plain(agent), "—", "", "", "")
        for i, turn in enumerate(conv.turns):
            calls = "\n".join(
                f"{c.name}({', '.join(f'{k}={v!r}' for k, v in c.arguments.items())})"
                + (f" ✗ {c.error}" if c.error else "")
                for c in turn.tool_calls
            )
            table.add_row(
                plain(conv.id if i == 0 else ""),
                plain(agent if i == 0 else ""),
                str(i + 1),  # turns are numbered from 1, as in the UI and failure reasons
                plain(turn.query),
                plain(calls),
                plain(turn.answer),
            )
    console.print(table)
