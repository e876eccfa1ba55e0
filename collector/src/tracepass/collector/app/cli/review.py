"""`tracepass review export|import`: human labels for LLM-judged turns."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from tracepass.collector.app.cli.common import (
    OutputFormat,
    OutputOption,
    TableOrJsonOption,
    emit_json_or_table,
    fail,
    fmt_num,
    load_json_file,
    stderr_console,
    stdout_console,
)

review_app = typer.Typer(
    no_args_is_help=True,
    help="Human review of LLM-judged turns: export a sample, import labels, measure agreement.",
    epilog="Examples:\n\n  tracepass review export run.json --sample 100 -o to_label.csv\n\n"
    "  tracepass review import to_label.csv --results run.json",
)

EXPORT_EPILOG = """\
Examples:

  tracepass evaluate traces.jsonl -r refs/ --default-grader llm --judge my.judges:make --format json -o run.json

  tracepass review export run.json --sample 100 --seed 7 -o to_label.csv

  tracepass review export --state tracepass-state/state.sqlite -o labelled.csv

  tracepass review export --results-url postgresql://tracepass@db/tracepass -o labelled.csv

Fill the human_label column (pass/fail, yes/no, 1/0; leave empty to skip), then run
`tracepass review import`. With --state, the rows are the judged turns of the
conversations people labelled in the collector's review queue, human_label filled.
Replicas sharing a PostgreSQL results store (state.results_url) keep their labels in
the database: export them with --results-url (or TRACEPASS_RESULTS_URL), from any
machine that reaches it; the state files hold none.

Exit codes: 0 ok, 2 bad input (no judged turns, unknown output extension, not a state
file or results database, database unreachable).
"""

IMPORT_EPILOG = """\
Examples:

  tracepass review import to_label.csv

  tracepass review import to_label.csv --results run.json --format json

Exit codes: 0 ok, 2 bad input (the message names file and line).
"""


def register(app: typer.Typer) -> None:
    app.add_typer(review_app, name="review")


@review_app.command("export", epilog=EXPORT_EPILOG)
def export(
    output: Annotated[Path, typer.Option("--output", "-o", help="File to write: .csv or .jsonl.")],
    results: Annotated[
        Path | None, typer.Argument(help="`evaluate --format json` output.", show_default=False)
    ] = None,
    sample: Annotated[
        int | None,
        typer.Option(
            "--sample",
            min=1,
            help="Number of judged turns to sample (required with RESULTS).",
            show_default=False,
        ),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Sampling seed (reproducible).")] = 0,
    state: Annotated[
        Path | None,
        typer.Option(
            "--state",
            help="A collector's state file (read only): export the review queue's labels.",
            show_default=False,
        ),
    ] = None,
    results_url: Annotated[
        str | None,
        typer.Option(
            "--results-url",
            envvar="TRACEPASS_RESULTS_URL",
            help="The replicas' PostgreSQL results store (state.results_url, read only): "
            "export the labels kept there.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Write a sample of LLM-judged turns for people to label, or the labels people gave
    in the live review queue (--state).

    Columns: query, answer, expected, judge score and reasoning, and human_label.
    """
    # Imported here: pydantic models would otherwise load for every `tracepass --help`.
    from tracepass.evaluator.offline import human_review as review_mod

    if output.suffix.lower() not in (".csv", ".jsonl", ".ndjson"):
        fail(f"{output}: output must end in .csv or .jsonl")
    given = [x for x in (results, state, results_url) if x is not None]
    if len(given) != 1:
        fail(
            "give either RESULTS (an `evaluate --format json` output), --state FILE or "
            "--results-url URL"
        )
    if state is not None:
        _export_state(state, output)
        return
    if results_url is not None:
        _export_database(results_url, output)
        return
    assert results is not None
    if sample is None:
        fail("--sample N is required with RESULTS")
    doc = load_json_file(results, "RESULTS")
    if not isinstance(doc, dict) or "conversations" not in doc:
        fail(f"{results}: not `tracepass evaluate --format json` output (no 'conversations')")
    rows = review_mod.judged_turns(doc)
    if not rows:
        fail(
            f"{results}: no LLM-judged turns (evaluate with an llm grader, e.g. "
            "--default-grader llm --judge module:attr)"
        )
    picked = review_mod.sample_rows(rows, sample, seed)
    try:
        review_mod.write_rows(picked, output)
    except (review_mod.ReviewError, OSError) as exc:
        fail(str(exc))
    stderr_console().print(
        f"wrote {len(picked)} of {len(rows)} judged turns to {output}",
        highlight=False,
        markup=False,
    )


def _export_state(state: Path, output: Path) -> None:
    """The review queue's labels of a state file, in the export's columns."""
    import sqlite3

    from tracepass.collector.state import ReadOnlyFile, ReviewLabels, decode_result, sqlite_tools

    if not state.is_file():
        fail(f"{state}: no such state file (--state)")
    try:
        conn = sqlite3.connect(f"file:{state}?mode=ro", uri=True)
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
            if "results" not in tables:
                fail(f"{state}: not a tracepass state file (no results table)")
            labels = ReviewLabels(ReadOnlyFile(conn)).labels() if "review_labels" in tables else []
            tools = sqlite_tools(conn.execute)

            def lookup(key: str) -> Any:
                found = conn.execute("SELECT view FROM results WHERE conv_key=?", (key,)).fetchone()
                return None if found is None else decode_result(found[0], tools)

            _write_labelled(str(state), labels, lookup, output)
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        fail(f"{state}: not a tracepass state file: {exc}")


def _export_database(url: str, output: Path) -> None:
    """The labels of a shared PostgreSQL results store, in the export's columns. Read
    only: a database without tracepass's tables is refused, not given them."""
    import psycopg

    from tracepass.collector.state.postgres import PostgresResults, ResultsUnavailable, redact_url

    label = redact_url(url)
    try:
        with psycopg.connect(url, connect_timeout=10) as conn:
            found = conn.execute(
                "SELECT to_regclass('results'), to_regclass('review_labels')"
            ).fetchone()
    except psycopg.Error as exc:
        fail(f"{label}: cannot read the results database: {str(exc).strip()}")
    if found is None or found[0] is None:
        fail(f"{label}: not a tracepass results database (no results table)")
    if found[1] is None:
        fail(f"{label}: no labelled judged turns (label conversations in the review queue)")
    store = PostgresResults(url, max_connections=1, read_timeout_s=10.0)
    store.open()
    try:
        _write_labelled(label, store.review.labels(), store.get_result, output)
    except (ResultsUnavailable, psycopg.Error) as exc:
        fail(f"{label}: cannot read the results database: {str(exc).strip()}")
    finally:
        store.close()


def _write_labelled(
    source: str, labels: list[Any], lookup: Callable[[str], Any], output: Path
) -> None:
    """Write the judged turns of each labelled conversation (`lookup`: its stored
    result, None when no longer stored) with the person's labels filled."""
    from tracepass.evaluator.offline import human_review as review_mod

    rows: list[dict[str, Any]] = []
    missing = 0
    for item in labels:
        try:
            stored = lookup(item.conversation_id)
        except (ValueError, TypeError, KeyError) as exc:
            fail(f"{source}: a stored result is unreadable: {exc}")
        if stored is None or stored.result is None:
            missing += 1
            continue
        doc = stored.result.model_dump(mode="json")
        rows += review_mod.labelled_rows(doc, item.turns)
    if not rows:
        fail(f"{source}: no labelled judged turns (label conversations in the review queue)")
    try:
        review_mod.write_rows(rows, output)
    except (review_mod.ReviewError, OSError) as exc:
        fail(str(exc))
    note = f" ({missing} labelled conversations no longer stored)" if missing else ""
    stderr_console().print(
        f"wrote {len(rows)} judged turns of {len(labels) - missing} labelled conversations "
        f"to {output}{note}",
        highlight=False,
        markup=False,
    )


@review_app.command("import", epilog=IMPORT_EPILOG)
def import_(
    labels: Annotated[Path, typer.Argument(help="Labelled .csv or .jsonl from `review export`.")],
    results: Annotated[
        Path | None,
        typer.Option(
            "--results",
            help="The run's `evaluate` JSON: correct its whole judge pass rate (Rogan–Gladen) "
            "instead of the sample's.",
        ),
    ] = None,
    output_format: TableOrJsonOption = OutputFormat.TABLE,
    output: OutputOption = None,
) -> None:
    """Measure judge–human agreement from labelled rows.

    Confusion matrix, accuracy, Cohen's kappa, sensitivity, specificity and the success rate corrected for judge error (Rogan–Gladen).
    """
    from tracepass.evaluator.offline import human_review as review_mod

    try:
        read = review_mod.read_labels(labels)
    except review_mod.ReviewError as exc:
        fail(str(exc))
    if not read.pairs:
        fail(f"{labels}: no labelled rows (fill the human_label column)")
    population = None
    if results is not None:
        doc = load_json_file(results, "--results")
        if not isinstance(doc, dict) or "conversations" not in doc:
            fail(f"{results}: not `tracepass evaluate --format json` output")
        population = review_mod.judge_pass_rate(doc)
    report = review_mod.agreement_report(read, population)
    data: dict[str, Any] = report.model_dump(mode="json")
    data["unlabelled"] = read.unlabelled
    data["population"] = (
        None if population is None else {"judged": population[0], "judge_passed": population[1]}
    )
    emit_json_or_table(
        data,
        as_json=output_format is OutputFormat.JSON,
        output=output,
        print_table=lambda: _print(data),
    )


def _print(data: dict[str, Any]) -> None:
    console = stdout_console()
    m = data["matrix"]
    matrix = Table(title=f"Judge vs human ({data['n']} labelled, {data['unlabelled']} skipped)")
    matrix.add_column("")
    matrix.add_column("human pass", justify="right")
    matrix.add_column("human fail", justify="right")
    matrix.add_row("judge pass", str(m["tp"]), str(m["fp"]))
    matrix.add_row("judge fail", str(m["fn"]), str(m["tn"]))
    console.print(matrix)
    stats = Table(title="Agreement")
    stats.add_column("statistic")
    stats.add_column("value", justify="right")
    for key in (
        "accuracy",
        "kappa",
        "sensitivity",
        "specificity",
        "judge_pass_rate",
        "human_pass_rate",
    ):
        stats.add_row(key.replace("_", " "), fmt_num(data[key]))
    corrected = data["corrected_pass_rate"]
    label = "corrected pass rate (Rogan–Gladen)"
    if data["population"] is not None:
        label += f", over {data['population']['judged']} judged turns"
    stats.add_row(
        label, fmt_num(corrected["value"]) + (" (clipped)" if corrected["clipped"] else "")
    )
    console.print(stats)
    for note in [*data["notes"], *([corrected["note"]] if corrected.get("note") else [])]:
        console.print(f"note: {note}", markup=False, highlight=False)
