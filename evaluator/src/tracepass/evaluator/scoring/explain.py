"""Why a conversation did not pass, in words and in a call-by-call diff.

Scoring says *how much* a turn was wrong (tool-correctness dimensions, grader scores);
people on call need *what* was wrong: "get_weather.city: expected 'Paris', got 'Lyon'".
This module derives that from a stored `ConversationResult` alone (it carries the
actual calls and the expected tools of every turn), so the query API, the web UI, the
failure log line and the HTML report all explain a failure the same way.

Pairing here is for display and never changes a score: expected and actual calls are
paired by name in call order, preferring a call whose arguments match fully. Custom
argument matchers (`module:function`) are not run again: they may have side effects,
and the score they gave is already in the result.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from tracepass.evaluator.models import (
    ConversationResult,
    ExpectedTool,
    Outcome,
    ToolCall,
    TurnResult,
)
from tracepass.evaluator.scoring.argmatch import MATCHERS, ArgumentMatchError, match_arguments
from tracepass.evaluator.scoring.failure_signatures import is_failing, result_signatures

__all__ = [
    "ArgumentDiff",
    "CallRow",
    "FailureAnalysis",
    "failed_turns",
    "failure_analysis",
    "failure_reasons",
    "natural_key",
    "trajectory_rows",
    "violation_rules",
]

CallStatus = Literal["match", "arguments", "missing", "extra"]
MAX_REASON_CHARS = 160


@dataclass(frozen=True, slots=True)
class ArgumentDiff:
    """One argument that does not match: `expected`/`actual` are the values (`missing`
    says the actual call lacked the key, `unexpected` that the reference did not name
    it)."""

    key: str
    expected: Any
    actual: Any
    missing: bool = False
    unexpected: bool = False


@dataclass(frozen=True, slots=True)
class CallRow:
    """One line of the side-by-side trajectory: an expected call, an actual call, or a
    pair of them. `out_of_order` marks a pair that breaks the expected relative order."""

    status: CallStatus
    expected: ExpectedTool | None
    actual: ToolCall | None
    out_of_order: bool = False
    diffs: tuple[ArgumentDiff, ...] = ()


def _score(expected: ExpectedTool, actual: ToolCall) -> float:
    if expected.arguments is None or expected.argument_match not in MATCHERS:
        return 1.0
    try:
        return match_arguments(
            expected.arguments,
            actual.arguments,
            expected.argument_match,
            abs_tol=expected.abs_tol,
            rel_tol=expected.rel_tol,
        )
    except ArgumentMatchError:
        return 0.0


def argument_diffs(expected: ExpectedTool, actual: ToolCall) -> tuple[ArgumentDiff, ...]:
    """The arguments of `actual` that the expected call's matcher rejects, key by key."""
    mode = expected.argument_match
    want = expected.arguments
    if want is None or mode == "ignore" or mode not in MATCHERS:
        return ()
    got = actual.arguments
    out: list[ArgumentDiff] = []
    checked = want if mode != "superset" else {k: want[k] for k in got if k in want}
    for key, value in checked.items():
        if key not in got:
            if mode != "superset":
                out.append(ArgumentDiff(key, value, None, missing=True))
            continue
        try:
            ok = match_arguments(
                {key: value},
                {key: got[key]},
                mode,
                abs_tol=expected.abs_tol,
                rel_tol=expected.rel_tol,
            )
        except ArgumentMatchError:
            ok = 0.0
        if ok < 1.0:
            out.append(ArgumentDiff(key, value, got[key]))
    if mode in ("exact", "numeric", "superset"):
        out.extend(
            ArgumentDiff(key, None, got[key], unexpected=True) for key in got if key not in want
        )
    return tuple(out)


def _pair(
    calls: Sequence[ToolCall],
    expected: Sequence[ExpectedTool],
    scores: dict[tuple[int, int], float] | None = None,
) -> dict[int, int]:
    """expected index → actual index: same name, in order, a full argument match first.
    `scores` (if given) receives every (expected, actual) score computed on the way, so
    the caller does not match those arguments again."""
    used: set[int] = set()
    pairs: dict[int, int] = {}
    for full_only in (True, False):
        for j, exp in enumerate(expected):
            if j in pairs:
                continue
            for i, call in enumerate(calls):
                if i in used or call.name != exp.name:
                    continue
                if full_only:
                    score = _score(exp, call)
                    if scores is not None:
                        scores[(j, i)] = score
                    if score < 1.0:
                        continue
                pairs[j] = i
                used.add(i)
                break
    return pairs


def _out_of_order(pairs: Mapping[int, int]) -> set[int]:
    """Expected indices whose pair is not on a longest in-order chain (by actual index)."""
    ordered = sorted(pairs.items())  # by expected index
    actual = [i for _, i in ordered]
    n = len(actual)
    best = [1] * n
    prev = [-1] * n
    for b in range(n):
        for a in range(b):
            if actual[a] < actual[b] and best[a] + 1 > best[b]:
                best[b], prev[b] = best[a] + 1, a
    keep: set[int] = set()
    if n:
        cur = max(range(n), key=lambda x: best[x])
        while cur >= 0:
            keep.add(ordered[cur][0])
            cur = prev[cur]
    return {j for j, _ in ordered if j not in keep}


def trajectory_rows(
    calls: Sequence[ToolCall], expected: Sequence[ExpectedTool] | None
) -> list[CallRow]:
    """The actual calls next to the expected ones, in the actual order with missing
    expected calls inserted where the reference has them. `expected=None` (tools not
    checked): every call is shown as-is, with status "match"."""
    if expected is None:
        return [CallRow("match", None, c) for c in calls]
    scores: dict[tuple[int, int], float] = {}
    pairs = _pair(calls, expected, scores)
    late = _out_of_order(pairs)
    by_actual = {i: j for j, i in pairs.items()}
    rows: list[CallRow] = []
    pending_missing = [j for j in range(len(expected)) if j not in pairs]

    def flush_missing(before_expected: int | None) -> None:
        while pending_missing and (before_expected is None or pending_missing[0] < before_expected):
            rows.append(CallRow("missing", expected[pending_missing.pop(0)], None))

    for i, call in enumerate(calls):
        j = by_actual.get(i)
        if j is None:
            rows.append(CallRow("extra", None, call))
            continue
        flush_missing(j)
        score = scores.get((j, i))
        if score is None:
            score = _score(expected[j], call)
        # A full match of a built-in matcher is a match of every key (tested): no
        # per-key diffs to look for. (Each match compiles the matcher: the analysis of a
        # failing turn matched every paired call three times before.)
        diffs = () if score >= 1.0 else argument_diffs(expected[j], call)
        status: CallStatus = "match" if score >= 1.0 and not diffs else "arguments"
        rows.append(CallRow(status, expected[j], call, out_of_order=j in late, diffs=diffs))
    flush_missing(None)
    return rows


def natural_key(text: str | None) -> tuple[tuple[int, int, str], ...]:
    """Sort key for ids shown to people: digit runs compare as numbers, so `demo-0-20`
    comes before `demo-0-199`."""
    parts = re.split(r"(\d+)", text or "")
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in parts)


def failed_turns(result: ConversationResult) -> int:
    """Turns judged incorrect (turns without a verdict are not failures)."""
    return sum(1 for t in result.turns if t.correct is False)


def violation_rules(result: ConversationResult) -> list[str]:
    """Distinct rule names of the result's policy violations (empty when the result
    type has none: tolerant of results written before violations existed)."""
    rules: list[str] = []
    for v in getattr(result, "violations", None) or ():
        rule = getattr(v, "rule", None) if not isinstance(v, Mapping) else v.get("rule")
        if isinstance(rule, str) and rule not in rules:
            rules.append(rule)
    return rules


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_REASON_CHARS else text[: MAX_REASON_CHARS - 1] + "…"


def _turn_rows(turn: TurnResult) -> list[CallRow] | None:
    """The trajectory rows of a turn whose tools are wrong (None: tools not wrong)."""
    tc = turn.tool_correctness
    if tc is None or tc.correct:
        return None
    return trajectory_rows(turn.tool_calls, turn.expected_tools)


def _turn_reasons(turn: TurnResult, rows: list[CallRow] | None) -> list[str]:
    where = f"turn {turn.index + 1}"
    out: list[str] = []
    if turn.tool_error:
        out.append(f"{where}: argument matcher error: {turn.tool_error}")
    if turn.answer_error:
        out.append(f"{where}: grader error: {turn.answer_error}")
    tc = turn.tool_correctness
    if tc is not None and rows is not None:
        for row in rows:
            if row.status == "missing" and row.expected is not None:
                out.append(f"{where}: missing call {row.expected.name}")
            elif row.status == "extra" and row.actual is not None:
                out.append(f"{where}: extra call {row.actual.name}")
            elif row.status == "arguments" and row.actual is not None:
                for d in row.diffs:
                    name = f"{row.actual.name}.{d.key}"
                    if d.missing:
                        out.append(f"{where}: {name} missing (expected {d.expected!r})")
                    elif d.unexpected:
                        out.append(f"{where}: {name} not expected (got {d.actual!r})")
                    else:
                        out.append(f"{where}: {name}: expected {d.expected!r}, got {d.actual!r}")
                if not row.diffs:
                    out.append(f"{where}: {row.actual.name} arguments rejected by matcher")
            if row.out_of_order and row.actual is not None:
                out.append(f"{where}: {row.actual.name} out of order")
        if not any(r.status != "match" or r.out_of_order for r in rows):
            out.append(f"{where}: tool correctness {tc.overall:.2f}")
    if turn.answer_correct is False:
        failed = [g for g in turn.graders if g.passed is False]
        detail = ", ".join(
            g.grader + ("" if g.score is None else f" {g.score:.2f}") for g in failed
        )
        out.append(f"{where}: answer incorrect" + (f" ({detail})" if detail else ""))
    return out


@dataclass(frozen=True, slots=True)
class FailureAnalysis:
    """Why a result is not a pass, both ways: `reasons` in words (all of them, short),
    `signatures` as failure-mode keys (`failure_signatures.py`)."""

    reasons: tuple[str, ...]
    signatures: tuple[str, ...]


# The recent analyses, by result identity: the store's index, the failure-mode index
# and the failure log line all ask about the same result within one evaluation batch,
# and pairing calls is the costly part. Sized above a batch (the conversations one loop
# iteration completed: ≈ 60 under load; 256 is also what the results cache keeps alive
# anyway), because the links of the result chain see the
# whole batch one link at a time: with the last 8 only, the failure log line computed
# every analysis a second time (issue 36). Holding the result keeps its id from being
# reused; the entry is the result's own, so a hit is checked by identity.
_RECENT: dict[int, tuple[ConversationResult, bool | None, FailureAnalysis]] = {}
_RECENT_SIZE = 256


def failure_analysis(result: ConversationResult, complete: bool | None = None) -> FailureAnalysis:
    """Reasons and signatures of `result` computed once (trajectory rows paired once per
    failing turn). `complete`: whether the conversation was complete (None: unknown;
    it names the reason of an incomplete outcome)."""
    known = _RECENT.get(id(result))
    if known is not None and known[0] is result and (complete is None or known[1] == complete):
        return known[2]
    analysis = _analyse(result, complete)
    _RECENT.pop(id(result), None)
    _RECENT[id(result)] = (result, complete, analysis)
    if len(_RECENT) > _RECENT_SIZE:
        with contextlib.suppress(KeyError, RuntimeError, StopIteration):  # another thread
            del _RECENT[next(iter(_RECENT))]
    return analysis


def _analyse(result: ConversationResult, complete: bool | None) -> FailureAnalysis:
    if result.outcome == Outcome.PASS and not is_failing(result):
        return FailureAnalysis((), ())
    out: list[str] = []
    if result.outcome == Outcome.UNSCORED:
        out.append("no reference matched")
    elif result.outcome == Outcome.INCOMPLETE:
        out.append(f"incomplete: {len(result.turns)} turn(s) evaluated")
    turn_rows = [(t, _turn_rows(t)) for t in result.turns if t.correct is not True]
    for turn, rows in turn_rows:
        out.extend(_turn_reasons(turn, rows))
    for v in getattr(result, "violations", None) or ():
        rule = getattr(v, "rule", "violation")
        message = getattr(v, "message", "")
        out.append(f"violation {rule}: {message}" if message else f"violation {rule}")
    if not out:
        out.append(result.outcome.value)
    signatures = result_signatures(result, turn_rows, complete=complete)
    return FailureAnalysis(tuple(_short(r) for r in out), tuple(signatures))


def failure_reasons(result: ConversationResult, limit: int = 5) -> list[str]:
    """At most `limit` short strings saying why `result` is not a pass (empty for a
    pass): outcome-level causes first, then each failing turn's, then violations."""
    if result.outcome == Outcome.PASS:
        return []
    return list(failure_analysis(result).reasons[:limit])
