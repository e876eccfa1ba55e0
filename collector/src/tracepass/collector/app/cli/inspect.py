"""`tracepass inspect FILE…`: how tracepass reads each span of each turn, with warnings
for shapes that look misread (see `assembly/inspection.py`)."""

from __future__ import annotations

import dataclasses
import difflib
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from tracepass.collector.app.cli.common import (
    EXIT_GATE,
    ConversationIdKeyOption,
    MultiValueCommand,
    OtlpFilesArgument,
    OutputFormat,
    OutputOption,
    TableOrJsonOption,
    emit_json_or_table,
    fail,
    plain,
    stdout_console,
    write_text,
)

if TYPE_CHECKING:
    from tracepass.collector.assembly import InspectionReport
    from tracepass.evaluator.models import ReferenceSet

EPILOG = """\
Examples:

  tracepass inspect traces.jsonl

  tracepass inspect traces.jsonl logs.jsonl --format json -o inspection.json

  tracepass inspect traces.jsonl --references refs/

  tracepass inspect --suggest-mapping traces.jsonl > mapping.yaml

  tracepass inspect --config collector.yaml --strict traces.jsonl

Exit codes: 0 ok (warnings included unless --strict), 1 warnings with --strict,
2 unreadable or malformed file or config.
"""

ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        help="Collector config whose conventions.custom mappings to read the files with "
        "(and assembly.conversation_id_keys).",
    ),
]
StrictOption = Annotated[bool, typer.Option("--strict", help="Exit 1 when there is any warning.")]
SuggestMappingOption = Annotated[
    bool,
    typer.Option(
        "--suggest-mapping",
        help="Print a starting conventions.custom mapping (YAML) from the span shapes in "
        "the files, instead of the report.",
    ),
]


def register(app: typer.Typer) -> None:
    app.command(epilog=EPILOG, cls=MultiValueCommand)(inspect)


def inspect(
    files: OtlpFilesArgument,
    output_format: TableOrJsonOption = OutputFormat.TABLE,
    output: OutputOption = None,
    conversation_id_key: ConversationIdKeyOption = None,
    references: Annotated[
        list[Path] | None,
        typer.Option(
            "--references",
            "-r",
            help="Reference files or folders: warn about reference_ids they do not hold.",
            show_default=False,
        ),
    ] = None,
    config_file: ConfigOption = None,
    strict: StrictOption = False,
    suggest_mapping: SuggestMappingOption = False,
) -> None:
    """Show how tracepass reads the spans in OTLP files, to onboard a new framework.

    Per conversation and turn: which convention and framework adapter read each span,
    which fields were found and where from (attribute, span event, log, adapter, model
    request), and warnings for shapes that look misread. When nothing is read, it lists
    the span names, scopes and attribute keys it saw and points to a mapping.
    """
    from tracepass.collector.app.cli import sources
    from tracepass.collector.assembly import SpanShapes, inspect_requests, suggestion_as_json
    from tracepass.collector.assembly import suggest_mapping as suggested_mapping
    from tracepass.collector.config import ConfigError, load_config
    from tracepass.collector.normalize import CustomConventions

    keys = list(conversation_id_key or ())
    custom = None
    if config_file is not None:
        if not config_file.is_file():
            fail(f"{config_file}: no such file (--config)")
        try:
            config = load_config(config_file)
        except ConfigError as exc:
            fail(str(exc))
        keys = [*config.assembly.conversation_id_keys, *keys]
        if config.conventions.custom:
            custom = CustomConventions(config.conventions)
    shapes = SpanShapes()
    report = inspect_requests(
        sources.requests_from_otlp(files), conversation_id_keys=keys, custom=custom, shapes=shapes
    )
    if suggest_mapping:
        text = (
            suggestion_as_json(shapes)
            if output_format is OutputFormat.JSON
            else suggested_mapping(shapes)
        )
        write_text(text, output)
        return
    if references:
        _warn_unknown_reference_ids(report, sources.reference_sets(references))
    emit_json_or_table(
        {**dataclasses.asdict(report), "warning_count": report.warning_count},
        as_json=output_format is OutputFormat.JSON,
        output=output,
        print_table=lambda: print_report(report),
    )
    if strict and report.warning_count:
        raise typer.Exit(EXIT_GATE)


def _warn_unknown_reference_ids(report: InspectionReport, sets: list[ReferenceSet]) -> None:
    """A reference_id no set holds would be matched by query instead (the collector
    counts it in tracepass_reference_id_unknown_total): a warning on its conversation."""
    known = {r.id for s in sets for r in s.references}
    known |= {f"{s.name}:{r.id}" for s in sets for r in s.references}
    for conv in report.conversations:
        if conv.reference_id and conv.reference_id not in known:
            close = difflib.get_close_matches(conv.reference_id, sorted(known), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            conv.warnings.append(
                f"reference_id {conv.reference_id!r} is in none of the references "
                f"(it would be matched by its query instead){hint}"
            )


def _fields(fields: dict[str, str]) -> str:
    return ", ".join(
        name if source == "attribute" else f"{name}←{source}" for name, source in fields.items()
    )


def print_report(report: InspectionReport) -> None:
    console = stdout_console()
    conventions = ", ".join(f"{k} {v}" for k, v in report.spans_by_convention.items())
    adapters = ", ".join(f"{k} {v}" for k, v in report.spans_by_adapter.items()) or "none"
    console.print(plain(f"spans by convention: {conventions}; adapted: {adapters}"))
    for message in report.rejected:
        console.print(plain(f"rejected: {message}"))
    for warning in report.warnings:
        console.print(plain(f"⚠ {warning}"))
    for conv in report.conversations:
        for warning in conv.warnings:
            console.print(plain(f"⚠ conversation {conv.id}: {warning}"))
        for turn in conv.turns:
            table = Table(
                # Numbered from 1, as in the UI and failure reasons (JSON keeps `index`).
                title=plain(f"conversation {conv.id} · turn {turn.index + 1}"),
                caption=plain(f"query: {turn.query!r}\nanswer: {turn.answer!r}"),
                show_lines=False,
            )
            for col in ("span", "kind", "convention", "adapters", "fields (←source)"):
                table.add_column(col, overflow="fold")
            for span in turn.spans:
                table.add_row(
                    plain(span.name),
                    span.kind + (f" ({span.role})" if span.role else ""),
                    plain(span.convention or "—"),
                    plain(", ".join(span.adapters)),
                    plain(_fields(span.fields)),
                )
            console.print(table)
            for call in turn.tool_calls:
                console.print(
                    plain(
                        f"  tool {call.name}({', '.join(call.arguments)}) arguments from "
                        f"{call.arguments_source}; result {'yes' if call.has_result else 'no'}"
                        + (f"; error {call.error!r}" if call.error else "")
                    )
                )
            for warning in turn.warnings:
                console.print(plain(f"  ⚠ {warning}"))
    total = report.warning_count
    console.print(plain(f"{total} warning(s)" if total else "no warnings"))
