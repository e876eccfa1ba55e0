"""`tracepass references validate|import|show` (and `candidates|approve`, in
`reference_candidates.py`)."""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from tracepass.collector.app.cli.common import (
    fail,
    plain,
    stderr_console,
    stdout_console,
    write_text,
)

if TYPE_CHECKING:
    # Typing only: loading the evaluator's models costs most of `tracepass --help`.
    from tracepass.evaluator.models import ExpectedTool, ReferenceSet

references_app = typer.Typer(
    no_args_is_help=True,
    help="Validate, import and inspect reference sets (ground truth).",
    epilog="Examples:\n\n  tracepass references validate refs/\n\n"
    "  tracepass references import --from fair-forge dataset.json -o refs/ff.yaml\n\n"
    "  tracepass references show refs/",
)

VALIDATE_EPILOG = """\
Examples:

  tracepass references validate refs/

  tracepass references validate refs/billing.yaml refs/search.jsonl

Exit codes: 0 valid, 2 invalid (the message names file, line and field).
"""

IMPORT_EPILOG = """\
Examples:

  tracepass references import --from fair-forge dataset.json -o refs/from_ff.yaml

  tracepass references import --from adk weather.evalset.json > refs/weather.yaml

Exit codes: 0 ok, 2 unreadable or malformed input.
"""

SHOW_EPILOG = """\
Examples:

  tracepass references show refs/

Exit codes: 0 ok, 2 invalid reference set.
"""


class ImportFormat(StrEnum):
    FAIR_FORGE = "fair-forge"
    TAU2 = "tau2"
    ADK = "adk"


def register(app: typer.Typer) -> None:
    from tracepass.collector.app.cli import reference_candidates

    reference_candidates.register(references_app)
    app.add_typer(references_app, name="references")


@references_app.command("validate", epilog=VALIDATE_EPILOG)
def validate(
    paths: Annotated[
        list[Path], typer.Argument(help="Reference files or folders.", show_default=False)
    ],
) -> None:
    """Check reference sets and agent policies: schema, unique ids, argument-match rules,
    policy rules, regexes and JSON Schemas."""
    from tracepass.collector.app.cli import sources

    # Validation runs no grader: `command` graders are checked, not refused (the
    # commands that grade need --allow-command-graders or the config key).
    sets = sources.reference_sets(paths, allow_command_graders=True)
    total = sum(len(rs.references) for rs in sets)
    policies = sum(len(rs.policies) for rs in sets)
    stdout_console().print(
        f"[green]ok[/]: {len(sets)} reference set(s), {total} reference(s), "
        f"{policies} polic{'y' if policies == 1 else 'ies'}",
        highlight=False,
    )


@references_app.command("import", epilog=IMPORT_EPILOG)
def import_(
    file: Annotated[Path, typer.Argument(help="Fair Forge dataset or ADK eval set (JSON).")],
    source_format: Annotated[
        ImportFormat, typer.Option("--from", help="Format of FILE.", show_default=False)
    ],
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write YAML here, not stdout.")
    ] = None,
    name: Annotated[
        str | None, typer.Option("--name", help="Reference set name (default: file stem).")
    ] = None,
    skip_unmappable: Annotated[
        bool,
        typer.Option(
            "--skip-unmappable",
            help="tau2: skip tasks that need τ²'s environment (listed on stderr) instead "
            "of exit 2.",
        ),
    ] = False,
) -> None:
    """Convert a Fair Forge dataset or an ADK eval set to a tracepass YAML reference set."""
    from tracepass.evaluator.references import (
        ReferenceLoadError,
        dump_reference_set_yaml,
        import_adk,
        import_fair_forge,
    )

    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        fail(f"{file}: no such file")
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"{file}: cannot read: {exc}")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        fail(f"{file}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}")
    set_name = name or file.name.split(".")[0]
    if source_format is ImportFormat.TAU2:
        _import_tau2(data, file, set_name, output, skip_unmappable)
        return
    importer = import_fair_forge if source_format is ImportFormat.FAIR_FORGE else import_adk
    try:
        imported = importer(data, source=str(file), name=set_name)
    except ReferenceLoadError as exc:
        fail(str(exc))
    for line in imported.skipped:
        stderr_console().print(plain(f"skipped: {line}"))
    write_text(dump_reference_set_yaml(imported.reference_set), output)


def _import_tau2(
    data: Any, file: Path, set_name: str, output: Path | None, skip_unmappable: bool
) -> None:
    """τ² tasks → the reference set (-o FILE or stdout) and, for nl_assertions, the
    conversation judges beside it (`FILE.judges.yaml`, an `evaluation:` config snippet)."""
    import yaml

    from tracepass.evaluator.references import (
        ReferenceLoadError,
        dump_reference_set_yaml,
        import_tau2,
    )

    try:
        imported = import_tau2(
            data, source=str(file), name=set_name, skip_unmappable=skip_unmappable
        )
    except ReferenceLoadError as exc:
        fail(str(exc))
    for line in imported.skipped:
        stderr_console().print(plain(f"skipped: {line}"))
    write_text(dump_reference_set_yaml(imported.reference_set), output)
    if not imported.judges:
        return
    snippet = yaml.safe_dump(
        {
            "evaluation": {
                "conversation_judges": [
                    j.model_dump(mode="json", exclude_defaults=True) for j in imported.judges
                ]
            }
        },
        sort_keys=False,
        allow_unicode=True,
        width=100,
    )
    if output is None:
        stderr_console().print(
            plain(
                f"note: {len(imported.judges)} task(s) carry nl_assertions; give -o FILE to "
                "write their conversation judges to FILE.judges.yaml"
            )
        )
        return
    judges_path = output.with_name(output.stem + ".judges.yaml")
    write_text(snippet, judges_path)
    stderr_console().print(
        plain(
            f"{len(imported.judges)} conversation judge(s) (nl_assertions) written to "
            f"{judges_path}: merge into your config's evaluation.conversation_judges "
            "(they need evaluation.judge)"
        )
    )


def _tools(expected: tuple[ExpectedTool, ...] | None) -> str:
    if expected is None:
        return "not checked"
    if not expected:
        return "none"
    return ", ".join(t.name for t in expected)


@references_app.command("show", epilog=SHOW_EPILOG)
def show(
    paths: Annotated[
        list[Path], typer.Argument(help="Reference files or folders.", show_default=False)
    ],
) -> None:
    """List references: id, turns, first query, expected tools, graders."""
    from tracepass.collector.app.cli import sources

    sets = sources.reference_sets(paths, allow_command_graders=True)  # runs nothing
    console = stdout_console()
    for rs in sets:
        console.print(_table(rs))


def _table(rs: ReferenceSet) -> Table:
    table = Table(title=f"{rs.name} (version {rs.version}, {len(rs.references)} references)")
    for col in ("id", "turns", "first query", "expected tools", "graders", "tags"):
        table.add_column(col, overflow="fold")
    for ref in rs.references:
        first = ref.turns[0] if ref.turns else None
        graders = sorted({g.type for t in ref.turns for g in t.graders}) or ["default"]
        table.add_row(
            plain(ref.id),
            str(len(ref.turns)),
            plain(first.query if first else ""),
            plain(" | ".join(_tools(t.expected_tools) for t in ref.turns)),
            plain(", ".join(graders)),
            plain(", ".join(ref.tags)),
        )
    return table
