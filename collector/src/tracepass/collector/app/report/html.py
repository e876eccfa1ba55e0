"""Render the HTML report: one file, images inlined as data URIs, no external assets,
so it can be attached to a CI run and opened offline. Jinja2 autoescaping is on:
queries, answers and tool arguments come from agents and users and are untrusted."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

import jinja2

from tracepass.collector.api import humane_duration, humane_usd
from tracepass.collector.app.report import charts, data
from tracepass.evaluator.offline.evaluation_run import TOOL_DIMENSIONS
from tracepass.evaluator.stats.readiness import Readiness, Verdict, words
from tracepass.evaluator.vocabulary import K_METRIC_SYMBOLS

_MAX_REFERENCE_ROWS = 40


def _env() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("tracepass.collector.app.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )


def fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        return f"{value:.{digits}f}"
    return str(value)


_TIER_CSS = {
    Readiness.PRODUCTION_READY: "ok",
    Readiness.INCONCLUSIVE: "warn",
    Readiness.NEEDS_IMPROVEMENT: "bad",
    Readiness.INSUFFICIENT_DATA: "none",
}


def _readiness(verdict: Mapping[str, Any]) -> dict[str, str]:
    """The readiness rule's words and sentence (`tracepass.evaluator.stats.readiness`)."""
    if not verdict:
        return {"label": words(Readiness.INSUFFICIENT_DATA), "css": "none", "detail": ""}
    ruled = Verdict.from_json(dict(verdict))
    return {
        "label": ruled.label(),
        "css": _TIER_CSS[ruled.tier],
        "detail": ruled.reason(),
    }


def _passk_rows(summary: Mapping[str, Any]) -> list[dict[str, str]]:
    rows = []
    for metric, symbol in K_METRIC_SYMBOLS.items():
        label = f"{symbol}k"
        for k, block in sorted((summary.get(metric) or {}).items(), key=lambda kv: int(kv[0])):
            rows.append(
                {
                    "k": k,
                    "metric": label,
                    "unbiased": fmt(block.get("unbiased")),
                    "plugin": fmt(block.get("plugin")),
                    "mean": fmt(block.get("mean")),
                    "interval": f"[{fmt(block.get('lower'))}, {fmt(block.get('upper'))}]",
                }
            )
    return rows


def _cards(summary: Mapping[str, Any]) -> list[dict[str, str]]:
    def rate(key: str) -> str:
        value = (summary.get(key) or {}).get("rate")
        return "—" if value is None else f"{value:.1%}"

    return [
        {"label": "conversations", "value": str(summary.get("conversations", 0))},
        {
            "label": "matched / unmatched",
            "value": f"{summary.get('matched', 0)} / {summary.get('unmatched', 0)}",
        },
        {"label": "correct", "value": str(summary.get("correct", 0))},
        {"label": "tasks (references)", "value": str(summary.get("tasks", "—"))},
        {"label": "conversation correctness", "value": rate("conversation_correctness")},
        {"label": "tool-correct turns", "value": rate("tool_correctness")},
        {"label": "answer-correct turns", "value": rate("answer_correctness")},
    ]


_MAX_JUDGEMENT_ROWS = 200


def _judge_rows(summary: Mapping[str, Any]) -> list[dict[str, str]]:
    """One row per conversation judge: its verdict counts and pass rates."""
    rows = []
    for name, block in (summary.get("judges") or {}).items():
        outcomes = block.get("outcomes") or {}
        rate = block.get("pass_rate") or {}
        pow_k = block.get("pass_pow_k") or {}
        rows.append(
            {
                "name": str(name),
                "judged": str(block.get("judged", 0)),
                "counts": " · ".join(f"{k} {v}" for k, v in outcomes.items()),
                "rate": fmt(rate.get("rate")),
                "interval": f"[{fmt(rate.get('lower'))}, {fmt(rate.get('upper'))}]",
                "pass_pow_k": " · ".join(
                    f"k={k}: {fmt(v.get('plugin'))}"
                    for k, v in sorted(pow_k.items(), key=lambda kv: int(kv[0]))
                ),
            }
        )
    return rows


def _judgement_rows(doc: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The verdicts worth reading first: fails and missing verdicts, then passes."""
    rows = list(doc.get("judgements") or [])
    rows.sort(
        key=lambda r: {"fail": 0, "error": 1, "skipped_budget": 2}.get(str(r.get("outcome")), 3)
    )
    return rows[:_MAX_JUDGEMENT_ROWS]


def render_report(doc: Mapping[str, Any], *, title: str = "tracepass evaluation") -> str:
    """The report as one HTML string."""
    summary = doc.get("summary") or {}
    level = float(summary.get("level") or 0.95)
    ks = [int(k) for k in (summary.get("pass_at_k") or {})]
    curves = data.curves(doc, max([*ks, 5]))
    tool_versions = data.tool_by_version(doc)
    tool_refs = data.tool_by_reference(doc)
    shown_refs = dict(list(tool_refs.items())[:_MAX_REFERENCE_ROWS])
    trajectory = data.trajectory_by_version(doc)
    failure_rows, failure_total = data.failures(doc)
    run = doc.get("run") or {}
    generated = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    subtitle = " · ".join(
        part for part in (str(run.get("source", "")), f"generated {generated}") if part
    )
    env = _env()
    env.globals["fmt"] = fmt
    return env.get_template("report.html.j2").render(
        title=title,
        subtitle=subtitle,
        cards=_cards(summary),
        readiness=_readiness(summary.get("readiness") or {}),
        version_readiness=[
            {"version": label, "trials": v["trials"], **_readiness(v)}
            for label, v in data.readiness_by_version(doc).items()
        ],
        level_pct=f"{level:.0%}",
        passk_chart=charts.passk_curves(curves, level) if curves else None,
        passk_rows=_passk_rows(summary),
        tool_dim_chart=charts.grouped_bars(
            tool_versions, TOOL_DIMENSIONS, "Tool correctness per dimension (mean over turns)"
        )
        if tool_versions
        else None,
        tool_ref_chart=charts.heatmap(shown_refs, TOOL_DIMENSIONS, "Tool correctness per reference")
        if shown_refs
        else None,
        tool_ref_truncated=len(tool_refs) > len(shown_refs),
        tool_ref_shown=len(shown_refs),
        tool_ref_total=len(tool_refs),
        radar_chart=charts.radar(trajectory) if trajectory else None,
        failures=failure_rows,
        failures_total=failure_total,
        judges=_judge_rows(summary),
        judgements=_judgement_rows(doc),
        judgements_total=len(doc.get("judgements") or []),
        cost_latency=[_cost_row(v) for v in doc.get("cost_latency") or []],
    )


def _cost_row(v: Mapping[str, Any]) -> dict[str, str]:
    """One version's tokens, cost and latency, formatted (unknown figures as "—")."""

    def usd(x: Any) -> str:
        return humane_usd(x)

    def secs(x: Any) -> str:
        return humane_duration(x)

    def count(x: Any) -> str:
        return "—" if x is None else f"{x:,}"

    tokens = v.get("tokens") or {}
    label = " ".join(str(p) for p in (v.get("agent_name"), v.get("agent_version")) if p)
    return {
        "version": label or "—",
        "conversations": str(v.get("conversations", 0)),
        "priced": str(v.get("priced", 0)),
        "model_calls": count(v.get("model_calls")),
        "input": count(tokens.get("input_tokens")),
        "output": count(tokens.get("output_tokens")),
        "cached": count(tokens.get("cached_input_tokens")),
        "reasoning": count(tokens.get("reasoning_tokens")),
        "cost_mean": usd(v.get("cost_usd_mean")),
        "cost_p95": usd(v.get("cost_usd_p95")),
        "cost_total": usd(v.get("cost_usd_total")),
        "p50": secs(v.get("duration_s_p50")),
        "p95": secs(v.get("duration_s_p95")),
    }
