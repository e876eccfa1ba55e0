"""`tracepass references candidates|approve`: reference candidates offline, from a
state file (the unreferenced results a collector stored) or from OTLP trace files."""

from __future__ import annotations

import json
import sqlite3
import unicodedata
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from tracepass.collector.app.cli.common import fail, plain, stdout_console, write_text

if TYPE_CHECKING:
    from tracepass.evaluator.references.candidate_mining import Candidate

CANDIDATES_EPILOG = """\
Examples:

  tracepass references candidates --state tracepass-state.sqlite

  tracepass references candidates traces/*.otlp.jsonl --references refs/ --format json

Exit codes: 0 ok (also when there is no candidate), 2 unreadable input.
"""

APPROVE_EPILOG = """\
Examples:

  tracepass references approve cand-convert-100-eur-to-nok-1a2b3c4d5e \\
      --state tracepass-state.sqlite --to refs/fx.yaml

Exit codes: 0 written, 2 unknown candidate, invalid YAML or FILE exists (never
overwritten).
"""

StateOption = Annotated[
    Path | None,
    typer.Option("--state", help="A collector's state file (read only).", show_default=False),
]
FilesArgument = Annotated[
    list[Path] | None,
    typer.Argument(help="OTLP trace files (instead of --state).", show_default=False),
]
ReferencesOption = Annotated[
    list[Path] | None,
    typer.Option(
        "--references", "-r", help="Reference files: conversations they match are skipped."
    ),
]
MinOption = Annotated[
    int, typer.Option("--min-conversations", min=2, help="Agreeing conversations needed.")
]


def safe(text: object) -> str:
    """`text` for a terminal: control and format characters (newlines, escapes,
    bidirectional overrides) shown as `\\uXXXX`, never acted on."""
    return "".join(
        f"\\u{ord(ch):04x}" if unicodedata.category(ch) in ("Cc", "Cf") else ch for ch in str(text)
    )


def _from_state(path: Path) -> list[tuple[object, object]]:
    from tracepass.collector.state import decode_result, sqlite_tools

    if not path.is_file():
        fail(f"{path}: no such state file (--state)")
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            rows = conn.execute(
                "SELECT conv_key, view FROM results WHERE reference_id IS NULL "
                "AND outcome IS NOT NULL ORDER BY closed_at"
            ).fetchall()
            out: list[tuple[object, object]] = []
            tools = sqlite_tools(conn.execute)
            for key, text in rows:
                try:
                    stored = decode_result(text, tools)
                except (ValueError, TypeError, KeyError) as exc:
                    fail(f"{path}: stored result of {key!r} unreadable: {exc}")
                out.append((stored.conversation, stored.result))
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        fail(f"{path}: not a tracepass state file: {exc}")
    return out


def mine(
    state: Path | None,
    files: list[Path] | None,
    references: list[Path] | None,
    min_conversations: int,
) -> list[Candidate]:
    from tracepass.collector.app.cli import sources
    from tracepass.evaluator.models import Conversation, ConversationResult
    from tracepass.evaluator.references.candidate_mining import CandidateMiner
    from tracepass.evaluator.references.matching import ReferenceCatalog

    if (state is None) == (not files):
        fail("give either --state FILE or OTLP trace files")
    catalog = ReferenceCatalog(sources.reference_sets(references) if references else [])
    miner = CandidateMiner(min_conversations)
    pairs = (
        _from_state(state)
        if state is not None
        else [(c, None) for c in sources.conversations_from_otlp(files or [])]
    )
    for conversation, result in pairs:
        assert isinstance(conversation, Conversation)
        assert result is None or isinstance(result, ConversationResult)
        if catalog.match(conversation) is None:
            miner.add(conversation, result)
    return miner.candidates()


def candidates(
    files: FilesArgument = None,
    state: StateOption = None,
    references: ReferencesOption = None,
    min_conversations: MinOption = 5,
    output_format: Annotated[
        str, typer.Option("--format", help="table or json.", show_default=True)
    ] = "table",
) -> None:
    """Propose references from conversations that matched none: tasks (normalized
    first query) where at least --min-conversations conversations behaved alike."""
    from tracepass.collector.api import candidate_json

    if output_format not in ("table", "json"):
        fail(f"--format: {output_format!r} is not one of table, json")
    found = mine(state, files, references, min_conversations)
    if output_format == "json":
        body = {"candidates": [candidate_json(c) for c in found]}
        write_text(json.dumps(body, ensure_ascii=False, indent=2), None)
        return
    table = Table(title=f"{len(found)} reference candidate(s)")
    for column in ("id", "query", "tools", "conversations", "agreement", "agent versions"):
        table.add_column(column)
    for c in found:
        versions = ", ".join(f"{safe(v)} x{n}" for v, n in c.agent_versions.items())
        table.add_row(
            plain(safe(c.id)),
            plain(safe(c.query)),
            plain(safe(", ".join(c.tools))),
            str(c.conversations),
            f"{c.agreement:.2f}",
            plain(versions),
        )
    stdout_console().print(table)


def approve(
    candidate_id: Annotated[str, typer.Argument(help="The candidate's id.")],
    to: Annotated[Path, typer.Option("--to", help="The reference file to create.")],
    files: FilesArgument = None,
    state: StateOption = None,
    references: ReferencesOption = None,
    min_conversations: MinOption = 5,
) -> None:
    """Write a candidate's YAML to a new reference file (validated by the reference
    loader; an existing file is never overwritten)."""
    from tracepass.collector.api import ApprovalError, write_reference
    from tracepass.evaluator.references.candidate_yaml import candidate_yaml

    found = {c.id: c for c in mine(state, files, references, min_conversations)}
    candidate = found.get(candidate_id)
    if candidate is None:
        fail(f"no reference candidate {safe(candidate_id)!r} (tracepass references candidates)")
    if to.exists():
        fail(f"{to}: exists; approving never overwrites a file")
    try:
        written = write_reference(to.parent, to.name, candidate_yaml(candidate))
    except ApprovalError as exc:
        fail(str(exc))
    stdout_console().print(
        plain(f"ok: {written.path}: reference {', '.join(written.reference_ids)}")
    )


def register(app: typer.Typer) -> None:
    app.command("candidates", epilog=CANDIDATES_EPILOG)(candidates)
    app.command("approve", epilog=APPROVE_EPILOG)(approve)
