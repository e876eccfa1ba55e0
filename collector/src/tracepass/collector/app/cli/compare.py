"""`tracepass compare BASE.json CANDIDATE.json`."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from tracepass.collector.app.cli.common import (
    EXIT_GATE,
    OutputFormat,
    OutputOption,
    TableOrJsonOption,
    emit_json_or_table,
    fail,
    fmt_delta,
    fmt_num,
    load_chat_model,
    load_json_file,
    plain,
    stdout_console,
)
from tracepass.evaluator.vocabulary import K_METRIC_SYMBOLS

EPILOG = """\
Examples:

  tracepass evaluate runs/v1.jsonl --references refs/ --format json -o v1.json

  tracepass evaluate runs/v2.jsonl --references refs/ --format json -o v2.json

  tracepass compare v1.json v2.json

  tracepass compare v1.json v2.json --fail-on-regression --format json -o diff.json

  tracepass compare v1.json v2.json --judge mypkg.judges:make_judge

Exit codes: 0 ok, 1 regression found with --fail-on-regression, 2 bad input.
"""


def register(app: typer.Typer) -> None:
    app.command(epilog=EPILOG)(compare)


def compare(
    base: Annotated[Path, typer.Argument(help="`evaluate --format json` output of the base.")],
    candidate: Annotated[
        Path, typer.Argument(help="`evaluate --format json` output of the candidate.")
    ],
    output_format: TableOrJsonOption = OutputFormat.TABLE,
    output: OutputOption = None,
    fail_on_regression: Annotated[
        bool, typer.Option("--fail-on-regression", help="Exit 1 when any reference regressed.")
    ] = False,
    tolerance: Annotated[
        float,
        typer.Option(
            "--tolerance",
            min=0.0,
            max=1.0,
            help="A drop in success rate or tool correctness larger than this is a regression.",
        ),
    ] = 0.0,
    judge: Annotated[
        str | None,
        typer.Option(
            "--judge",
            help="module:attr of a langchain-core chat model (or factory) for pairwise "
            "judging of answers, asked in both orders to cancel position bias.",
        ),
    ] = None,
    judge_concurrency: Annotated[
        int, typer.Option("--judge-concurrency", min=1, help="Parallel judge requests.")
    ] = 4,
) -> None:
    """Compare two evaluation runs (base vs candidate), regressions first.

    Per-reference and overall differences in success rate, pass@k / pass^k and tool correctness, and the posterior probability that the candidate is better.
    """
    # Imported here: scipy and langchain-core cost seconds, `--help` should not pay them.
    from tracepass.evaluator.offline import pairwise
    from tracepass.evaluator.offline import version_comparison as compare_mod

    base_doc = load_json_file(base, "BASE")
    cand_doc = load_json_file(candidate, "CANDIDATE")
    try:
        result = compare_mod.compare_documents(
            base_doc,
            cand_doc,
            tolerance=tolerance,
            base_name=str(base),
            candidate_name=str(candidate),
        )
    except compare_mod.CompareInputError as exc:
        fail(str(exc))
    if judge is not None:
        model = load_chat_model(judge)
        items = pairwise.pair_items(base_doc, cand_doc)
        judged = asyncio.run(pairwise.judge_pairs(model, items, concurrency=judge_concurrency))
        result["pairwise"] = {
            "counts": pairwise.tally(judged),
            "items": [r.as_json() for r in judged],
        }

    emit_json_or_table(
        result,
        as_json=output_format is OutputFormat.JSON,
        output=output,
        print_table=lambda: _print_table(result),
    )
    if fail_on_regression and result["regressions"]:
        raise typer.Exit(EXIT_GATE)


def _num(value: float | None, *, sign: bool = False) -> str:
    """Costs and latencies: 4 significant digits (they span orders of magnitude)."""
    if value is None:
        return "—"
    return f"{value:+.4g}" if sign else f"{value:.4g}"


def _print_table(result: dict[str, Any]) -> None:
    console = stdout_console()
    overall = result["overall"]
    b, c = overall["base"], overall["candidate"]
    head = Table(title="Overall", show_lines=False)
    for col in ("metric", "base", "candidate", "delta"):
        head.add_column(col, justify="left" if col == "metric" else "right")
    head.add_row("trials (n)", str(b["n"]), str(c["n"]), "")
    head.add_row(
        "success rate", fmt_num(b["rate"]), fmt_num(c["rate"]), fmt_delta(overall["delta_rate"])
    )
    head.add_row(
        "tool correctness",
        fmt_num(b["tool_correctness"]),
        fmt_num(c["tool_correctness"]),
        fmt_delta(overall["delta_tool_correctness"]),
    )
    for metric, symbol in K_METRIC_SYMBOLS.items():
        for k, row in overall[metric].items():
            head.add_row(
                f"{symbol}{k} ({row['estimator']})",
                fmt_num(row["base"]),
                fmt_num(row["candidate"]),
                fmt_delta(row["delta"]),
            )
    head.add_row("P(candidate better)", "", fmt_num(overall["prob_candidate_better"]), "")
    costs = result.get("cost_latency") or {}
    if costs.get("delta") is not None:
        bv, cv, dv = costs["base"][0], costs["candidate"][0], costs["delta"]
        for key, label in (
            ("cost_usd_mean", "cost / conversation (USD)"),
            ("cost_usd_p95", "cost p95 (USD)"),
            ("duration_s_p95", "latency p95 (s)"),
        ):
            head.add_row(label, _num(bv.get(key)), _num(cv.get(key)), _num(dv.get(key), sign=True))
    console.print(head)

    table = Table(title="Per reference (regressions first)")
    for col in ("reference", "status", "base c/n", "cand c/n", "Δ rate", "Δ tools", "P(better)"):
        table.add_column(col, justify="left" if col in ("reference", "status") else "right")
    colors = {"regressed": "red", "improved": "green"}
    for entry in result["references"]:
        status = entry["status"]
        bside, cside = entry["base"], entry["candidate"]
        table.add_row(
            plain(entry["reference_id"]),
            f"[{colors.get(status, 'dim')}]{status}[/]",
            f"{bside['correct']}/{bside['n']}" if bside else "—",
            f"{cside['correct']}/{cside['n']}" if cside else "—",
            fmt_delta(entry["delta_rate"]),
            fmt_delta(entry["delta_tool_correctness"]),
            fmt_num(entry["prob_candidate_better"]),
        )
    console.print(table)
    if "pairwise" in result:
        counts = result["pairwise"]["counts"]
        console.print(
            f"Pairwise judge (position-swapped): candidate {counts['candidate']}, "
            f"base {counts['base']}, tie {counts['tie']}, error {counts['error']}"
        )
    n_reg = len(result["regressions"])
    console.print(
        f"[red]{n_reg} regression(s):[/] " + escape(", ".join(result["regressions"]))
        if n_reg
        else "[green]no regressions[/]"
    )
