"""Numbers behind the report, derived from an `evaluate --format json` document.

Kept apart from plotting so they can be tested without images: the charts only draw
what these functions return.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tracepass.evaluator import passk
from tracepass.evaluator.offline.evaluation_run import TOOL_DIMENSIONS, task_groups

TRAJECTORY_AXES = ("precision", "recall", "f1", "exact", "in_order", "any_order")


def version_label(conv: Mapping[str, Any]) -> str:
    name = conv.get("agent_name") or "agent"
    version = conv.get("agent_version")
    return f"{name} {version}" if version else str(name)


def by_version(doc: Mapping[str, Any]) -> dict[str, list[Mapping[str, Any]]]:
    groups: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for conv in doc.get("conversations") or []:
        groups[version_label(conv)].append(conv)
    return dict(sorted(groups.items()))


@dataclass
class Curve:
    """pass@K / pass^K for K = 1..k_max over one agent version's tasks."""

    label: str
    ks: list[int]
    at_mean: list[float | None] = field(default_factory=list)
    at_lower: list[float | None] = field(default_factory=list)
    at_upper: list[float | None] = field(default_factory=list)
    at_unbiased: list[float | None] = field(default_factory=list)
    pow_mean: list[float | None] = field(default_factory=list)
    pow_lower: list[float | None] = field(default_factory=list)
    pow_upper: list[float | None] = field(default_factory=list)
    pow_unbiased: list[float | None] = field(default_factory=list)
    trials: int = 0


def curves(doc: Mapping[str, Any], k_max: int) -> list[Curve]:
    ks = list(range(1, max(1, k_max) + 1))
    out = []
    level = float((doc.get("summary") or {}).get("level") or 0.95)
    for label, convs in by_version(doc).items():
        groups = list(task_groups(convs).values())
        if not groups:
            continue
        curve = Curve(label, ks, trials=sum(n for n, _ in groups))
        for k, agg in passk.estimate_tasks(groups, ks, level=level).items():
            del k
            curve.at_mean.append(agg.pooled.pass_at_k.mean)
            curve.at_lower.append(agg.pooled.pass_at_k.lower)
            curve.at_upper.append(agg.pooled.pass_at_k.upper)
            curve.at_unbiased.append(agg.mean_unbiased_at_k)
            curve.pow_mean.append(agg.pooled.pass_pow_k.mean)
            curve.pow_lower.append(agg.pooled.pass_pow_k.lower)
            curve.pow_upper.append(agg.pooled.pass_pow_k.upper)
            curve.pow_unbiased.append(agg.mean_unbiased_pow_k)
        out.append(curve)
    return out


def _tool_means(convs: Sequence[Mapping[str, Any]]) -> dict[str, float] | None:
    sums = dict.fromkeys(TOOL_DIMENSIONS, 0.0)
    n = 0
    for conv in convs:
        for turn in conv.get("turns") or []:
            tc = turn.get("tool_correctness")
            if tc is None:
                continue
            n += 1
            for dim in TOOL_DIMENSIONS:
                sums[dim] += float(tc.get(dim) or 0.0)
    return {dim: sums[dim] / n for dim in TOOL_DIMENSIONS} if n else None


def tool_by_version(doc: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """Mean of each tool-correctness dimension per agent version (turns with tools)."""
    out = {}
    for label, convs in by_version(doc).items():
        means = _tool_means(convs)
        if means is not None:
            out[label] = means
    return out


def tool_by_reference(doc: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """Mean of each dimension per reference, worst overall first."""
    groups: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for conv in doc.get("conversations") or []:
        if conv.get("reference_id") is not None:
            groups[str(conv["reference_id"])].append(conv)
    rows = {}
    for ref, convs in groups.items():
        means = _tool_means(convs)
        if means is not None:
            rows[ref] = means
    return dict(sorted(rows.items(), key=lambda item: (item[1]["overall"], item[0])))


def trajectory_by_version(doc: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """Per agent version, the mean over turns of each trajectory metric (booleans as
    rates), for the radar chart."""
    out = {}
    for label, convs in by_version(doc).items():
        sums = dict.fromkeys(TRAJECTORY_AXES, 0.0)
        n = 0
        for conv in convs:
            for turn in conv.get("turns") or []:
                traj = turn.get("trajectory")
                if not traj or traj.get("f1") is None:  # tools not checked on this turn
                    continue
                n += 1
                for axis in TRAJECTORY_AXES:
                    sums[axis] += float(traj.get(axis) or 0.0)
        if n:
            out[label] = {axis: sums[axis] / n for axis in TRAJECTORY_AXES}
    return out


def _format_call(call: Mapping[str, Any]) -> str:
    args = call.get("arguments")
    text = f"{call.get('name')}({_args(args)})"
    if call.get("error"):
        text += f" → error: {call['error']}"
    return text


def _args(args: Any) -> str:
    if args is None:
        return "…"
    if isinstance(args, Mapping):
        return ", ".join(f"{k}={v!r}" for k, v in args.items())
    return repr(args)


@dataclass(frozen=True)
class FailureRow:
    conversation_id: str
    reference_id: str | None
    agent: str
    turn: int
    query: str
    expected_tools: list[str] | None
    actual_tools: list[str]
    expected_answer: str
    answer: str
    answer_score: float | None
    tool_score: float | None
    reason: str


def failures(doc: Mapping[str, Any], limit: int = 200) -> tuple[list[FailureRow], int]:
    """Turns that are not correct (plus incomplete/error conversations without failing
    turns), at most ``limit`` rows; returns (rows, total)."""
    rows: list[FailureRow] = []
    total = 0
    for conv in doc.get("conversations") or []:
        if conv.get("correct"):
            continue
        turns = conv.get("turns") or []
        failing = [t for t in turns if t.get("correct") is not True]
        if not failing:
            total += 1
            if len(rows) < limit:
                rows.append(
                    FailureRow(
                        str(conv.get("conversation_id")),
                        conv.get("reference_id"),
                        version_label(conv),
                        -1,
                        "",
                        None,
                        [],
                        "",
                        "",
                        None,
                        None,
                        str(conv.get("outcome") or "fail"),
                    )
                )
            continue
        for i, turn in enumerate(failing):
            total += 1
            if len(rows) >= limit:
                continue
            tc = turn.get("tool_correctness")
            expected = turn.get("expected_tools")
            reasons = []
            if turn.get("answer_correct") is False:
                reasons.append("answer")
            if tc is not None and not tc.get("correct"):
                reasons.append("tools")
            if turn.get("answer_error"):
                reasons.append(f"grader error: {turn['answer_error']}")
            rows.append(
                FailureRow(
                    conversation_id=str(conv.get("conversation_id")),
                    reference_id=conv.get("reference_id"),
                    agent=version_label(conv),
                    turn=int(turn.get("index", i)),
                    query=str(turn.get("query") or ""),
                    expected_tools=None
                    if expected is None
                    else [_format_call(e) for e in expected],
                    actual_tools=[_format_call(c) for c in turn.get("tool_calls") or []],
                    expected_answer=str(turn.get("expected_answer") or ""),
                    answer=str(turn.get("answer") or ""),
                    answer_score=turn.get("answer_score"),
                    tool_score=None if tc is None else tc.get("overall"),
                    reason=", ".join(reasons) or str(conv.get("outcome") or "fail"),
                )
            )
    return rows, total
