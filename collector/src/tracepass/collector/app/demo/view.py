"""What the demo shows: a rich live panel, plain status lines (`--no-live`), and the
closing summary. Numbers come from the demo's per-version rolling windows (the same
estimators the `/metrics` gauges export per reference set)."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from tracepass.collector.app.demo.runner import KS, MIN_CONVERSATIONS, DemoOutcome, DemoState
from tracepass.evaluator.stats.passk import PassKEstimate

WINDOW_ORDER = {"fast": 0, "1m": 1, "run": 2}


def _q(q: PassKEstimate | None, *, interval: bool = True) -> str:
    """Posterior mean with its credible interval (pooled over the window's trials)."""
    if q is None or q.mean is None:
        return "—"
    text = f"{q.mean:.2f}"
    if interval and q.lower is not None and q.upper is not None:
        text += f" [{q.lower:.2f}, {q.upper:.2f}]"
    return text


def _u(q: PassKEstimate | None) -> str:
    """The unbiased per-task (tau-bench) estimate; needs k trials of a task."""
    return "—" if q is None or q.unbiased is None else f"{q.unbiased:.2f}"


def rows(state: DemoState) -> list[dict[str, Any]]:
    """One row per (version, window), sorted for display."""
    out = []
    for ks in state.snapshot():
        version = ks.key[1]
        for w in ks.windows:
            est = w.estimates
            out.append(
                {
                    "version": version,
                    "window": w.window,
                    "n": w.n,
                    "c": w.c,
                    "pass_at_1": est[1].pass_at_k if 1 in est else None,
                    "pass_at_3": est[3].pass_at_k if 3 in est else None,
                    "pass_pow_3": est[3].pass_pow_k if 3 in est else None,
                    "pass_pow_5": est[5].pass_pow_k if 5 in est else None,
                    "cusum": ks.cusum,
                }
            )
    out.sort(key=lambda r: (str(r["version"]), WINDOW_ORDER.get(str(r["window"]), 9)))
    return out


def _n(n: float, window: str) -> str:
    """`3/20` while the window is below the estimates' threshold, then the count."""
    shown = f"{n:.1f}" if window == "fast" else f"{n:.0f}"
    return f"{shown}/{MIN_CONVERSATIONS}" if n < MIN_CONVERSATIONS else shown


def live_panel(state: DemoState, service: Any) -> RenderableType:
    opts = state.options
    elapsed = min(state.elapsed, opts.duration)
    phase = (
        "[green]v1.0[/] (baseline)"
        if state.version == "1.0"
        else f"[red]v1.1[/] (regression {opts.regression_rate:.0%} since {opts.switch_at:g}s)"
    )
    head = Text.from_markup(
        f"[bold]tracepass demo[/] — travel-assistant   {elapsed:4.0f}s / {opts.duration:g}s   "
        f"now running {phase}\n"
        f"conversations sent [bold]{state.sent}[/] · evaluated [bold]{len(state.results)}[/]\n"
        f"metrics  [cyan]{service.metrics_url}[/]\n"
        f"web UI   [cyan]{service.ui_url}[/] (while the demo runs; --keep-serving keeps it up)\n"
        f"OTLP     grpc 127.0.0.1:{service.ports.grpc} · http 127.0.0.1:{service.ports.http}\n"
        f"report   {opts.report} (written at the end)"
    )
    table = Table(
        title=f"pass@k / pass^k per version and window: posterior mean [95% credible "
        f"interval], and the unbiased per-task estimate (estimates appear at "
        f"{MIN_CONVERSATIONS} conversations per window)",
        title_justify="left",
    )
    for col in (
        "version",
        "window",
        "n",
        "pass rate",
        "pass@1",
        "pass^3",
        "pass^3 unbiased",
        "pass^5",
        "CUSUM",
    ):
        table.add_column(col, justify="left" if col in ("version", "window") else "right")
    for r in rows(state):
        rate = f"{r['c'] / r['n']:.2f}" if r["n"] else "—"
        style = "red" if r["version"] != "1.0" else None
        table.add_row(
            r["version"],
            r["window"],
            _n(r["n"], r["window"]),
            rate,
            _q(r["pass_at_1"]),
            _q(r["pass_pow_3"]),
            _u(r["pass_pow_3"]),
            _q(r["pass_pow_5"], interval=False),
            f"{r['cusum']:.2f}",
            style=style,
        )
    notes = [Text(n, style="yellow") for n in state.notes]
    return Panel(Group(head, *notes, table), border_style="blue")


def status_line(state: DemoState) -> str:
    parts = [f"t={state.elapsed:.0f}s sent={state.sent} evaluated={len(state.results)}"]
    for r in rows(state):
        if r["window"] == "run":
            parts.append(
                f"v{r['version']}: n={_n(r['n'], r['window'])} pass^3={_q(r['pass_pow_3'])} "
                f"unbiased={_u(r['pass_pow_3'])}"
            )
    return " | ".join(parts)


def summary_table(outcome: DemoOutcome) -> Table:
    """Per version over the whole run: exact counts and pooled estimates from the
    evaluated conversations (the same numbers as the report)."""
    from tracepass.evaluator.offline.evaluation_run import summarize

    by_version: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for res in outcome.state.results.values():
        if res.reference_id is not None:
            by_version[res.agent_version or "?"].append(res.model_dump(mode="json"))
    table = Table(title="Summary per agent version (whole run)", title_justify="left")
    columns = (
        "version",
        "n",
        "correct",
        "pass@1",
        "pass^3",
        "pass^3 unbiased",
        "cost/conv",
        "p95 latency",
        "readiness",
    )
    for col in columns:
        table.add_column(col, justify="left" if col in ("version", "readiness") else "right")
    for version in sorted(by_version):
        s = summarize(by_version[version], list(KS))

        def cell(block: dict[str, Any]) -> str:
            if block.get("mean") is None:
                return "—"
            return f"{block['mean']:.2f} [{block['lower']:.2f}, {block['upper']:.2f}]"

        unbiased = s["pass_pow_k"]["3"].get("unbiased")
        table.add_row(
            version,
            str(s["matched"]),
            str(s["correct"]),
            cell(s["pass_at_k"]["1"]),
            cell(s["pass_pow_k"]["3"]),
            "—" if unbiased is None else f"{unbiased:.2f}",
            *_cost_cells(outcome, version),
            str(s["readiness"]["tier"]).replace("_", " "),
        )
    return table


def _cost_cells(outcome: DemoOutcome, version: str) -> tuple[str, str]:
    """Mean cost per priced conversation and p95 wall latency of one version (every
    conversation of it, referenced or not), as the overview shows them."""
    state = outcome.state
    costs: list[float] = []
    durations: list[float] = []
    for cid, res in state.results.items():
        if (res.agent_version or "?") != version:
            continue
        cost, duration = state.costs.get(cid, (None, None))
        if cost is not None:
            costs.append(cost)
        if duration is not None:
            durations.append(duration)
    cost_cell = "—" if not costs else f"${sum(costs) / len(costs):.5f}"
    if not durations:
        return cost_cell, "—"
    ranked = sorted(durations)
    p95 = ranked[min(len(ranked) - 1, math.ceil(0.95 * len(ranked)) - 1)]
    return cost_cell, f"{p95 * 1000:.0f} ms"
