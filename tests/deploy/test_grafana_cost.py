"""The dashboard's cost and latency panels (docs/cost-latency.md): cost per conversation
and p95 latency per version beside pass^k, and pass^k per dollar, placed without
overlapping any other panel. Their expressions are parsed by promtool with the others
(test_grafana.py::test_dashboard_exprs_parse)."""

from __future__ import annotations

from typing import Any

from test_grafana import all_panels, load_dashboard


def _cost_row() -> list[dict[str, Any]]:
    panels = load_dashboard()["panels"]
    start = next(i for i, p in enumerate(panels) if p["title"] == "Cost and latency")
    out = []
    for p in panels[start + 1 :]:
        if p["type"] == "row":
            break
        out.append(p)
    return out


def _overlap(a: dict[str, int], b: dict[str, int]) -> bool:
    return (
        a["x"] < b["x"] + b["w"]
        and b["x"] < a["x"] + a["w"]
        and a["y"] < b["y"] + b["h"]
        and b["y"] < a["y"] + a["h"]
    )


def test_cost_latency_panels_query_the_new_families() -> None:
    exprs = {p["title"]: " ".join(t["expr"] for t in p["targets"]) for p in _cost_row()}
    joined = " ".join(exprs.values())
    for family in (
        "tracepass_conversation_cost_usd_sum",
        "tracepass_conversation_cost_usd_count",
        "tracepass_conversation_duration_seconds_bucket",
        "tracepass_tokens_total",
        "tracepass_model_calls_unpriced_total",
        "tracepass_pass_pow_k",
    ):
        assert family in joined, family
    per_dollar = exprs["pass^$k per dollar by agent version"]
    assert "tracepass_pass_pow_k" in per_dollar
    assert "tracepass_conversation_cost_usd_sum" in per_dollar


def test_pass_pow_k_cost_and_latency_sit_side_by_side() -> None:
    by_title = {p["title"]: p["gridPos"] for p in _cost_row()}
    pow_k = by_title["pass^$k by agent version ($window)"]
    cost = by_title["Cost per conversation by agent version"]
    p95 = by_title["Conversation latency p95 by agent version"]
    assert pow_k["y"] == cost["y"] == p95["y"]
    assert pow_k["x"] + pow_k["w"] <= cost["x"]
    assert cost["x"] + cost["w"] <= p95["x"]


def test_cost_latency_panels_overlap_nothing() -> None:
    mine = {p["id"] for p in _cost_row()}
    panels = [p for p in all_panels(load_dashboard()) if "gridPos" in p]
    for p in panels:
        if p["id"] not in mine:
            continue
        for other in panels:
            if other is not p:
                assert not _overlap(p["gridPos"], other["gridPos"]), (p["title"], other["title"])
