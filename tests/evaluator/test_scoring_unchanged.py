"""Scoring per turn made cheaper (issue 27) without changing a score: the `fair-forge`
profile's tool correctness equals the previous implementation's exactly (kept here as
the oracle), and handing the evaluator's called names to the pairing changes nothing."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from tracepass.evaluator.models import ExpectedTool, ReferenceTurn, ToolCall, ToolCorrectness
from tracepass.evaluator.scoring.fairforge_profile import (
    fair_forge_matcher,
    fair_forge_tool_correctness,
)
from tracepass.evaluator.scoring.tool_correctness import (
    CompiledTurn,
    assign_calls,
    called_names,
    compile_turn,
    make_tool_correctness,
    score_turn,
)


def _previous(
    calls: Sequence[ToolCall],
    turn: ReferenceTurn,
    *,
    declared: bool | None,
    weights: tuple[float, float, float, float],
    tool_threshold: float,
) -> ToolCorrectness | None:
    """`fair_forge_tool_correctness` before issue 27 (commit 68c296e), verbatim."""
    expected = turn.expected_tools
    if expected is None or (not expected and not calls):
        return None
    if expected and not calls:
        s = p = q = u = 0.0
    else:
        used_names = {c.name for c in calls}
        exp_names = {t.name for t in expected}
        union = used_names | exp_names
        s = len(used_names & exp_names) / len(union) if union else 1.0
        compiled = compile_turn(turn, fair_forge_matcher)
        assert compiled is not None
        paired = {j: (i, credit) for i, j, credit in assign_calls(calls, compiled)}
        params: list[float] = []
        steps: list[float] = []
        for j in range(len(expected)):
            hit = paired.get(j)
            if hit is None:
                params.append(0.0)
                steps.append(0.0)
                continue
            i, credit = hit
            params.append(credit)
            steps.append(1.0 if i == j else 0.0)
        p = sum(params) / len(params) if params else 0.0
        q = (sum(steps) / len(steps) if steps else 0.0) if turn.tool_sequence_matters else 1.0
        u = 1.0 if declared else 0.0
    return make_tool_correctness(s, p, q, u, weights, tool_threshold)


# Plain, repeated and plugin-qualified names (`ns:a` pairs with an expected `a`).
_NAMES = st.sampled_from(["a", "b", "c", "ns:a", "b-x"])
_VALUES = (
    st.none()
    | st.booleans()
    | st.integers(-2, 2)
    | st.floats(allow_nan=False, width=16)
    | st.sampled_from(["x", "y", ""])
)
_ARGUMENTS = st.dictionaries(st.sampled_from(["k", "l", "m", "n"]), _VALUES, max_size=4)
_WEIGHTS = st.tuples(*[st.sampled_from([0.0, 0.1, 0.25, 1 / 3, 0.7, 1.0])] * 4)


@st.composite
def _turns(draw: st.DrawFn) -> tuple[list[ToolCall], ReferenceTurn]:
    expected_tools: tuple[ExpectedTool, ...] | None = None
    if draw(st.integers(0, 9)):  # mostly checked turns
        expected_tools = tuple(
            ExpectedTool(name=draw(_NAMES), arguments=draw(st.none() | _ARGUMENTS))
            for _ in range(draw(st.integers(0, 5)))
        )
    calls = [
        ToolCall(name=draw(_NAMES), arguments=draw(_ARGUMENTS))
        for _ in range(draw(st.integers(0, 5)))
    ]
    turn = ReferenceTurn(
        query="q", expected_tools=expected_tools, tool_sequence_matters=draw(st.booleans())
    )
    return calls, turn


@settings(deadline=None, max_examples=1500)
@given(_turns(), st.none() | st.booleans(), _WEIGHTS, st.sampled_from([0.5, 0.9, 1.0]))
def test_fair_forge_tool_correctness_equals_the_previous_one_exactly(
    case: tuple[list[ToolCall], ReferenceTurn],
    declared: bool | None,
    weights: tuple[float, float, float, float],
    threshold: float,
) -> None:
    calls, turn = case
    old = _previous(calls, turn, declared=declared, weights=weights, tool_threshold=threshold)
    compiled = compile_turn(turn, fair_forge_matcher)
    names = None if compiled is None else called_names(calls, compiled)
    plain = fair_forge_tool_correctness(
        calls, turn, declared=declared, weights=weights, tool_threshold=threshold
    )
    new = fair_forge_tool_correctness(
        calls,
        turn,
        declared=declared,
        weights=weights,
        tool_threshold=threshold,
        compiled=compiled,
        names=names,
    )
    assert plain == old
    assert new == old  # every field, floats compared exactly


@settings(deadline=None, max_examples=800)
@given(_turns(), st.none() | st.booleans(), st.sampled_from(["auto", "declared", "detected"]))
def test_default_profile_with_the_names_handed_over_is_unchanged(
    case: tuple[list[ToolCall], ReferenceTurn],
    declared: bool | None,
    utilization: str,
) -> None:
    calls, turn = case
    compiled: CompiledTurn | None = compile_turn(turn)
    if compiled is None:
        return
    args = (calls, compiled, "the answer x y 1", declared, (0.25,) * 4, 1.0, utilization)
    assert score_turn(*args, called_names(calls, compiled)) == score_turn(*args)  # type: ignore[arg-type]
