"""Ground-truth trajectory metrics (the six of the "Agents Companion" evaluation chapter):
exact match, in-order match, any-order match, precision, recall, F1 and single-tool use.

A trajectory is the ordered list of tool calls. The matching *unit* is the tool name, or
name + arguments (the expected tool's `argument_match` rule must score 1.0). Both sides
are multisets: a tool expected twice must be called twice to be fully recalled, and a
second call of a tool expected once is an extra (imprecise) call.

Edge cases (also in docs/metrics.md):

* predicted empty: precision = 1.0 if the reference is empty, else 0.0;
* reference empty: recall = 1.0 (nothing to miss);
* both empty: exact, in-order and any-order all hold, P = R = F1 = 1.0;
* F1 = 0.0 when P + R = 0.

Under name + arguments with non-exact matchers "matches" is not transitive, so the
multiset intersection is a maximum bipartite matching, not a count comparison.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from tracepass.evaluator.models import (
    ExpectedTool,
    Reference,
    ToolCall,
    TrajectoryScores,
    Turn,
    construct_unchecked,
)
from tracepass.evaluator.scoring.argmatch import compile_matcher

__all__ = [
    "TrajectoryMatch",
    "conversation_trajectory",
    "matched_names",
    "name_trajectory",
    "single_tool_use",
    "trajectory_scores",
]

TrajectoryMatch = Literal["name", "name_and_arguments"]
_FULL = 1.0 - 1e-12


def single_tool_use(predicted: Sequence[ToolCall], name: str) -> bool:
    """Did the agent call `name` at least once?"""
    return any(c.name == name for c in predicted)


def _unit(p: ToolCall, r: ExpectedTool, by_args: bool) -> bool:
    if p.name != r.name:
        return False
    return not by_args or compile_matcher(r)(p.arguments) >= _FULL


def _in_order(
    predicted: Sequence[ToolCall], reference: Sequence[ExpectedTool], by_args: bool
) -> bool:
    # Greedy earliest matching decides "reference is a subsequence of predicted" for any
    # per-pair predicate: taking the earliest fitting call never rules out a later one.
    j, n = 0, len(reference)
    if n == 0:
        return True
    for p in predicted:
        if _unit(p, reference[j], by_args):
            j += 1
            if j == n:
                return True
    return False


def _matched_by_name(predicted: Sequence[ToolCall], reference: Sequence[ExpectedTool]) -> int:
    counts: dict[str, int] = {}
    for r in reference:
        counts[r.name] = counts.get(r.name, 0) + 1
    matched = 0
    for p in predicted:
        left = counts.get(p.name, 0)
        if left:
            counts[p.name] = left - 1
            matched += 1
    return matched


def _matched_by_args(predicted: Sequence[ToolCall], reference: Sequence[ExpectedTool]) -> int:
    groups: dict[str, tuple[list[int], list[int]]] = {}
    for j, r in enumerate(reference):
        groups.setdefault(r.name, ([], []))[1].append(j)
    for i, p in enumerate(predicted):
        g = groups.get(p.name)
        if g is not None:
            g[0].append(i)
    matched = 0
    for a_idx, e_idx in groups.values():
        if not a_idx:
            continue
        ok = [
            [compile_matcher(reference[j])(predicted[i].arguments) >= _FULL for j in e_idx]
            for i in a_idx
        ]
        if len(a_idx) == 1 or len(e_idx) == 1:
            matched += int(any(any(row) for row in ok))
            continue
        from scipy.optimize import linear_sum_assignment

        weights = [[1.0 if x else 0.0 for x in row] for row in ok]
        rows, cols = linear_sum_assignment(weights, maximize=True)
        matched += sum(int(ok[i][j]) for i, j in zip(rows.tolist(), cols.tolist(), strict=True))
    return matched


_interned: dict[tuple[bool, bool, bool, int, int, int], TrajectoryScores] = {}
_INTERN_LIMIT = 4096


def _scores(
    exact: bool, in_order: bool, any_order: bool, matched: int, n_p: int, n_r: int
) -> TrajectoryScores:
    # Everything follows from these six values, which repeat endlessly (2 of 2 matched,
    # in order …): equal results are one shared frozen object, not rebuilt per turn.
    key = (exact, in_order, any_order, matched, n_p, n_r)
    hit = _interned.get(key)
    if hit is not None:
        return hit
    precision = matched / n_p if n_p else (1.0 if n_r == 0 else 0.0)
    recall = matched / n_r if n_r else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    made = construct_unchecked(
        TrajectoryScores,
        dict(
            exact=exact,
            in_order=in_order,
            any_order=any_order,
            precision=precision,
            recall=recall,
            f1=f1,
        ),
    )
    if len(_interned) >= _INTERN_LIMIT:
        _interned.clear()
    _interned[key] = made
    return made


def matched_names(predicted: Sequence[str], counts: dict[str, int]) -> int:
    """Size of the multiset intersection of `predicted` and the names counted in
    `counts` (expected name → how many times expected)."""
    left = dict(counts)
    matched = 0
    for name in predicted:
        n = left.get(name, 0)
        if n:
            left[name] = n - 1
            matched += 1
    return matched


def name_trajectory(predicted: list[str], reference: list[str], matched: int) -> TrajectoryScores:
    """The six metrics by name, given the names and their matched count (callers that
    already paired the calls know it; see `toolcorrectness.score_turn`)."""
    n_p, n_r = len(predicted), len(reference)
    exact = predicted == reference
    any_order = matched == n_r
    in_order = exact or (any_order and _names_in_order(predicted, reference))
    return _scores(exact, in_order, any_order, matched, n_p, n_r)


def _names_in_order(predicted: Sequence[str], reference: Sequence[str]) -> bool:
    j, n = 0, len(reference)
    if n == 0:
        return True
    for name in predicted:
        if name == reference[j]:
            j += 1
            if j == n:
                return True
    return False


def trajectory_scores(
    predicted: Sequence[ToolCall],
    reference: Sequence[ExpectedTool],
    *,
    match: TrajectoryMatch = "name",
) -> TrajectoryScores:
    if match != "name_and_arguments":
        return name_trajectory(
            [p.name for p in predicted],
            [r.name for r in reference],
            _matched_by_name(predicted, reference),
        )
    n_p, n_r = len(predicted), len(reference)
    matched = _matched_by_args(predicted, reference)
    exact = n_p == n_r and all(_unit(p, r, True) for p, r in zip(predicted, reference, strict=True))
    any_order = matched == n_r
    in_order = exact or (any_order and _in_order(predicted, reference, True))
    return _scores(exact, in_order, any_order, matched, n_p, n_r)


def conversation_trajectory(
    turns: Sequence[Turn], reference: Reference, *, match: TrajectoryMatch = "name"
) -> TrajectoryScores | None:
    """Trajectory over the concatenated turns, paired with reference turns by position.

    Only reference turns that check tools (`expected_tools` not None) contribute; their
    expected tools count even when the agent never reached the turn (so recall drops),
    and actual turns beyond the reference are left out. None if no turn checks tools."""
    predicted: list[ToolCall] = []
    expected: list[ExpectedTool] = []
    any_checked = False
    for i, rt in enumerate(reference.turns):
        if rt.expected_tools is None:
            continue
        any_checked = True
        expected.extend(rt.expected_tools)
        if i < len(turns):
            predicted.extend(turns[i].tool_calls)
    if not any_checked:
        return None
    return trajectory_scores(predicted, expected, match=match)
