"""Numbers behind the report, derived from an `evaluate --format json` document.

Kept apart from plotting so they can be tested without images: the charts only draw
what these functions return.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tracepass.evaluator.models import ExpectedTool, ToolCall
from tracepass.evaluator.offline.evaluation_run import (
    TOOL_DIMENSIONS,
    readiness_verdict,
    task_groups,
)
from tracepass.evaluator.scoring.explain import natural_key, trajectory_rows
from tracepass.evaluator.stats import passk
from tracepass.evaluator.stats.readiness import HEADLINE_K, TARGET, ReadinessRule

# The trajectory metrics compare tool *names*; "arguments" (the tool-correctness
# parameters score) is on the radar too, or a version that calls the right tools with
# wrong arguments draws the same perfect polygon as a correct one.
TRAJECTORY_AXES = ("precision", "recall", "f1", "exact", "in_order", "any_order", "arguments")


def version_label(conv: Mapping[str, Any]) -> str:
    name = conv.get("agent_name") or "agent"
    version = conv.get("agent_version")
    return f"{name} {version}" if version else str(name)


def by_version(doc: Mapping[str, Any]) -> dict[str, list[Mapping[str, Any]]]:
    groups: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for conv in doc.get("conversations") or []:
        groups[version_label(conv)].append(conv)
    return dict(sorted(groups.items(), key=lambda item: natural_key(item[0])))


def readiness_by_version(doc: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The readiness verdict of each agent version on its own: pooling versions hid a
    production-ready 1.0 behind a regressed 1.1 ("needs improvement" for both)."""
    summary = doc.get("summary") or {}
    level = float(summary.get("level") or 0.95)
    ruled = summary.get("readiness") or {}
    rule = ReadinessRule(int(ruled.get("k", HEADLINE_K)), float(ruled.get("target", TARGET)))
    out = {}
    for label, convs in by_version(doc).items():
        groups = list(task_groups(convs).values())
        verdict = readiness_verdict(groups, level, rule)
        out[label] = verdict | {"trials": sum(n for n, _ in groups)}
    return out


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
                tc = turn.get("tool_correctness") or {}
                for axis in TRAJECTORY_AXES:
                    value = tc.get("parameters", 1.0) if axis == "arguments" else traj.get(axis)
                    sums[axis] += float(value or 0.0)
        if n:
            out[label] = {axis: sums[axis] / n for axis in TRAJECTORY_AXES}
    return out


@dataclass(frozen=True)
class CallText:
    """One tool call as shown in the failures table: `name(` parts `)`, where each part
    is (text, differs) so the differing argument is highlighted (`explain.py`)."""

    name: str
    parts: tuple[tuple[str, bool], ...]
    status: str = "match"  # match | arguments | missing | extra
    error: str | None = None

    @property
    def text(self) -> str:
        return f"{self.name}({', '.join(t for t, _ in self.parts)})"

    @property
    def marked(self) -> list[str]:
        return [t for t, differs in self.parts if differs]


def _call_texts(turn: Mapping[str, Any]) -> tuple[list[CallText] | None, list[CallText]]:
    """(expected calls, actual calls) of a turn with differing arguments marked."""
    try:
        calls = [ToolCall.model_validate(c) for c in turn.get("tool_calls") or []]
        raw = turn.get("expected_tools")
        expected = None if raw is None else [ExpectedTool.model_validate(e) for e in raw]
    except ValueError:  # a document from an older tracepass: show the names only
        actual = [CallText(str(c.get("name")), ()) for c in turn.get("tool_calls") or []]
        raw = turn.get("expected_tools")
        return (None if raw is None else [CallText(str(e.get("name")), ()) for e in raw]), actual
    rows = trajectory_rows(calls, expected)
    exp_out: list[CallText] = []
    act_out: list[CallText] = []
    for row in rows:
        expected_marked = {d.key for d in row.diffs if not d.unexpected}
        actual_marked = {d.key for d in row.diffs if not d.missing}
        if row.expected is not None:
            args = row.expected.arguments
            parts = (
                (("…", False),)
                if args is None
                else tuple((f"{k}={v!r}", k in expected_marked) for k, v in args.items())
            )
            exp_out.append(CallText(row.expected.name, parts, row.status))
        if row.actual is not None:
            parts = tuple(
                (f"{k}={v!r}", k in actual_marked) for k, v in row.actual.arguments.items()
            )
            act_out.append(CallText(row.actual.name, parts, row.status, row.actual.error))
    return (None if expected is None else exp_out), act_out


@dataclass(frozen=True)
class FailureRow:
    conversation_id: str
    reference_id: str | None
    agent: str
    turn: int
    query: str
    expected_tools: list[CallText] | None
    actual_tools: list[CallText]
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
            tc = turn.get("tool_correctness")
            expected_calls, actual_calls = _call_texts(turn)
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
                    expected_tools=expected_calls,
                    actual_tools=actual_calls,
                    expected_answer=str(turn.get("expected_answer") or ""),
                    answer=str(turn.get("answer") or ""),
                    answer_score=turn.get("answer_score"),
                    tool_score=None if tc is None else tc.get("overall"),
                    reason=", ".join(reasons) or str(conv.get("outcome") or "fail"),
                )
            )
    # Sorted before the cut, so the first `limit` rows are the first in natural order.
    rows.sort(key=lambda r: (natural_key(r.conversation_id), r.turn))
    return rows[:limit], total
