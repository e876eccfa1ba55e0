"""Tool correctness: optimal pairing, multiset selection, LCS sequence, utilization."""

from __future__ import annotations

from itertools import permutations
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracepass.evaluator.models import ExpectedTool, ReferenceTurn, ToolCall
from tracepass.evaluator.scoring.tool_correctness import (
    assign_calls,
    compile_turn,
    detect_utilization,
    lis_length,
    normalize_weights,
    tool_correctness,
)


def turn(*tools: ExpectedTool | str, ordered: bool = False) -> ReferenceTurn:
    return ReferenceTurn(
        query="q",
        expected_tools=tuple(ExpectedTool(name=t) if isinstance(t, str) else t for t in tools),
        tool_sequence_matters=ordered,
    )


def score(calls: list[ToolCall], rt: ReferenceTurn, **kw: Any):  # type: ignore[no-untyped-def]
    kw.setdefault("answer", None)
    kw.setdefault("declared", True)
    return tool_correctness(calls, compile_turn(rt), **kw)


def test_not_checked_and_not_applicable() -> None:
    assert score([ToolCall(name="a")], ReferenceTurn(query="q")) is None
    assert score([], turn()) is None


def test_expected_but_none_called_is_zero_everywhere() -> None:
    tc = score([], turn("a"))
    assert tc is not None
    assert (tc.selection, tc.parameters, tc.sequence, tc.utilization, tc.overall) == (0, 0, 0, 0, 0)
    assert not tc.correct


def test_none_expected_but_some_called_is_zero_everywhere() -> None:
    tc = score([ToolCall(name="a")], turn())
    assert tc is not None
    assert tc.overall == 0.0
    assert not tc.correct


def test_perfect() -> None:
    rt = turn(ExpectedTool(name="calc", arguments={"a": 1}), ordered=True)
    tc = score([ToolCall(name="calc", arguments={"a": 1.0})], rt)
    assert tc is not None
    assert tc.overall == 1.0
    assert tc.correct


def test_same_tool_twice_each_compared_with_its_counterpart() -> None:
    # Fair Forge compares both expected calls with the first actual call (→ 0.667).
    rt = turn(
        ExpectedTool(name="calc", arguments={"op": "mul", "a": 3, "b": 12}),
        ExpectedTool(name="calc", arguments={"op": "mul", "a": 36, "b": 0.9}),
        ordered=True,
    )
    calls = [
        ToolCall(name="calc", arguments={"op": "mul", "a": 3, "b": 12}),
        ToolCall(name="calc", arguments={"op": "mul", "a": 36, "b": 0.9}),
    ]
    tc = score(calls, rt)
    assert tc is not None
    assert tc.parameters == 1.0
    assert tc.sequence == 1.0
    assert tc.correct
    # swapped order: arguments still pair optimally (1.0), the order is wrong (LIS 1 of 2)
    tc = score(list(reversed(calls)), rt)
    assert tc is not None
    assert tc.parameters == 1.0
    assert tc.sequence == 0.5


def test_multiset_selection_penalizes_repeats_and_misses() -> None:
    tc = score([ToolCall(name="a"), ToolCall(name="a"), ToolCall(name="a")], turn("a"))
    assert tc is not None
    assert tc.selection == pytest.approx(1 / 3)
    tc = score([ToolCall(name="a")], turn("a", "a"))
    assert tc is not None
    assert tc.selection == 0.5
    assert tc.parameters == 0.5


def test_extra_call_at_start_does_not_zero_sequence() -> None:
    rt = turn("a", "b", "c", ordered=True)
    tc = score([ToolCall(name="x"), ToolCall(name="a"), ToolCall(name="b"), ToolCall(name="c")], rt)
    assert tc is not None
    assert tc.sequence == 1.0
    assert tc.selection == 0.75
    tc = score([ToolCall(name="c"), ToolCall(name="a"), ToolCall(name="b")], rt)
    assert tc is not None
    assert tc.sequence == pytest.approx(2 / 3)
    tc = score([ToolCall(name="c"), ToolCall(name="a")], turn("a", "b", "c"))
    assert tc is not None
    assert tc.sequence == 1.0


def test_argument_score_breaks_name_ties() -> None:
    rt = turn(ExpectedTool(name="get", arguments={"id": 2}))
    calls = [ToolCall(name="get", arguments={"id": 1}), ToolCall(name="get", arguments={"id": 2})]
    assert assign_calls(calls, compile_turn(rt)) == [(1, 0, 1.0)]  # type: ignore[arg-type]


def test_utilization_modes() -> None:
    rt = turn("weather")
    calls = [ToolCall(name="weather", result={"temperature": 18, "condition": "partly cloudy"})]
    detected = score(calls, rt, declared=None, answer="It is Partly Cloudy today")
    assert detected is not None
    assert detected.utilization == 1.0
    unused = score(calls, rt, declared=None, answer="No idea")
    assert unused is not None
    assert unused.utilization == 0.0
    declared = score(calls, rt, declared=False, answer="It is partly cloudy")
    assert declared is not None
    assert declared.utilization == 0.0
    forced = score(calls, rt, declared=False, answer="It is partly cloudy", utilization="detected")
    assert forced is not None
    assert forced.utilization == 1.0
    undeclared = score(calls, rt, declared=None, answer="x", utilization="declared")
    assert undeclared is not None
    assert undeclared.utilization == 0.0


@pytest.mark.parametrize(
    ("result", "answer", "expected"),
    [
        (32.4, "Your total is $32.40.", 1.0),
        (3.14159, "about 3.14", 1.0),
        (1234567, "1,234,567 people", 1.0),
        (42, "the answer is 53", 0.0),
        (0.9, "1 item", 0.0),
        ('{"city": "Paris"}', "It is in paris.", 1.0),
        (None, "anything", None),
        (True, "True", None),
        ("ok", "ok", None),
    ],
)
def test_detect_utilization(result: Any, answer: str, expected: float | None) -> None:
    assert detect_utilization(answer, [ToolCall(name="t", result=result)]) == expected


def test_failed_calls_are_not_searched() -> None:
    assert detect_utilization("Paris", [ToolCall(name="t", result="Paris", error="boom")]) is None


def test_weights_validated_and_normalized() -> None:
    assert normalize_weights(1, 1, 0, 2) == (0.25, 0.25, 0.0, 0.5)
    with pytest.raises(ValueError, match="not all be zero"):
        normalize_weights(0, 0, 0, 0)
    with pytest.raises(ValueError, match="sequence"):
        normalize_weights(1, 1, -1, 1)
    rt = turn("a", "b")
    tc = score([ToolCall(name="a")], rt, weights=normalize_weights(1, 0, 0, 0), tool_threshold=0.5)
    assert tc is not None
    assert tc.overall == 0.5
    assert tc.correct


def test_threshold_epsilon() -> None:
    tc = score([ToolCall(name="a")], turn("a"), weights=normalize_weights(0.1, 0.2, 0.3, 0.4))
    assert tc is not None
    assert tc.correct


# --------------------------------------------------------------- brute force

small_calls = st.lists(
    st.tuples(st.sampled_from("ab"), st.integers(0, 2)).map(
        lambda t: ToolCall(name=t[0], arguments={"x": t[1]})
    ),
    max_size=4,
)
small_expected = st.lists(
    st.tuples(st.sampled_from("ab"), st.integers(0, 2)).map(
        lambda t: ExpectedTool(name=t[0], arguments={"x": t[1], "y": 0}, argument_match="subset")
    ),
    min_size=1,
    max_size=4,
)


def _sim(c: ToolCall, e: ExpectedTool) -> float:
    if c.name != e.name:
        return -1.0
    return sum(1 for k, v in (e.arguments or {}).items() if c.arguments.get(k) == v) / len(
        e.arguments or {"": 0}
    )


@settings(max_examples=200, deadline=None)
@given(small_calls, small_expected)
def test_assignment_is_optimal(calls: list[ToolCall], expected: list[ExpectedTool]) -> None:
    pairs = assign_calls(
        calls, compile_turn(ReferenceTurn(query="q", expected_tools=tuple(expected)))
    )  # type: ignore[arg-type]
    # brute force: best (count of name matches, total argument score) over all injections
    best = (0, 0.0)
    n, m = len(calls), len(expected)
    slots = list(range(m)) + [None] * n
    for perm in set(permutations(slots, n)):
        count, total = 0, 0.0
        for i, j in enumerate(perm):
            if j is not None and calls[i].name == expected[j].name:
                count += 1
                total += _sim(calls[i], expected[j])
        best = max(best, (count, round(total, 9)))
    got = (len(pairs), round(sum(p[2] for p in pairs), 9))
    assert got == best
    assert all(calls[i].name == expected[j].name for i, j, _ in pairs)
    assert len({i for i, _, _ in pairs}) == len({j for _, j, _ in pairs}) == len(pairs)


@settings(deadline=None)
@given(st.lists(st.integers(0, 6), max_size=7))
def test_lis_against_brute_force(seq: list[int]) -> None:
    from itertools import combinations

    best = max(
        (
            k
            for k in range(len(seq) + 1)
            for idx in combinations(range(len(seq)), k)
            if all(seq[idx[t]] < seq[idx[t + 1]] for t in range(k - 1))
        ),
        default=0,
    )
    assert lis_length(seq) == best


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.integers(0, 2), min_size=5, max_size=5),
    st.lists(st.integers(0, 2), min_size=4, max_size=4),
)
def test_large_group_uses_scipy_and_is_optimal(xs: list[int], es: list[int]) -> None:
    calls = [ToolCall(name="a", arguments={"x": x}) for x in xs]
    expected = [
        ExpectedTool(name="a", arguments={"x": e, "y": 0}, argument_match="subset") for e in es
    ]
    pairs = assign_calls(
        calls, compile_turn(ReferenceTurn(query="q", expected_tools=tuple(expected)))
    )  # type: ignore[arg-type]
    best = max(
        sum(_sim(calls[i], expected[j]) for j, i in enumerate(perm))
        for perm in permutations(range(5), 4)
    )
    assert len(pairs) == 4
    assert sum(p[2] for p in pairs) == pytest.approx(best)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from("abcd"), st.integers(0, 2)).map(
            lambda t: ToolCall(name=t[0], arguments={"x": t[1]})
        ),
        max_size=5,
    ),
    st.lists(st.sampled_from("abcd"), max_size=4, unique=True),
    st.lists(st.integers(0, 2), min_size=4, max_size=4),
)
def test_lookup_pairing_equals_general_pairing(
    calls: list[ToolCall], names: list[str], xs: list[int]
) -> None:
    """Distinct expected names take the dict-lookup path; it must pair exactly as the
    grouped assignment does."""
    from dataclasses import replace

    expected = tuple(
        ExpectedTool(name=n, arguments={"x": x}) for n, x in zip(names, xs, strict=False)
    )
    compiled = compile_turn(ReferenceTurn(query="q", expected_tools=expected))
    assert compiled is not None
    assert compiled.unique is not None
    general = replace(compiled, unique=None)
    assert assign_calls(calls, compiled) == assign_calls(calls, general)
    for ordered in (False, True):
        fast = compile_turn(
            ReferenceTurn(query="q", expected_tools=expected, tool_sequence_matters=ordered)
        )
        assert fast is not None
        kw: dict[str, Any] = {"answer": None, "declared": True}
        assert tool_correctness(calls, fast, **kw) == tool_correctness(
            calls, replace(fast, unique=None), **kw
        )


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from("ab"), st.integers(0, 1)).map(
            lambda t: ToolCall(name=t[0], arguments={"x": t[1]})
        ),
        max_size=6,
    ),
    st.lists(st.tuples(st.sampled_from("ab"), st.integers(0, 1)), max_size=5),
    st.sampled_from(["exact", "subset", "numeric"]),
)
def test_in_order_shortcut_for_repeated_tools_equals_full_assignment(
    calls: list[ToolCall], exp: list[tuple[str, int]], mode: str
) -> None:
    """A repeated tool called exactly as expected pairs first-with-first without
    scoring the other pairs; that must be the assignment the full search picks."""
    from dataclasses import replace

    expected = tuple(ExpectedTool(name=n, arguments={"x": x}, argument_match=mode) for n, x in exp)
    compiled = compile_turn(ReferenceTurn(query="q", expected_tools=expected))
    assert compiled is not None
    assert compiled.pure
    full = replace(compiled, unique=None, pure=False)
    assert assign_calls(calls, compiled) == assign_calls(calls, full)


def test_numeric_text_results_are_compared_as_numbers() -> None:
    from tracepass.evaluator.models import ToolCall
    from tracepass.evaluator.scoring.tool_correctness import detect_utilization

    # LangChain stringifies tool outputs: "5" must be found in the answer as a number.
    assert detect_utilization("2 + 3 = 5", [ToolCall(name="add", result="5")]) == 1.0
    assert detect_utilization("It costs $32.40", [ToolCall(name="calc", result="32.4")]) == 1.0
    assert detect_utilization("2 + 3 = 6", [ToolCall(name="add", result="5")]) == 0.0
    assert detect_utilization("about 1234 km", [ToolCall(name="d", result="1,234")]) == 1.0


# --------------------------------------------------------------------------- names, agents


@pytest.mark.parametrize(
    ("called", "expected"),
    [
        ("events-search_events", "search_events"),  # Semantic Kernel plugin-function
        ("search_events", "events-search_events"),  # the reverse: the reference qualified
        ("calendar__search_events", "search_events"),  # MCP server__tool
        ("calendar.search_events", "search_events"),
    ],
)
def test_plugin_qualified_names_match_the_bare_name(called: str, expected: str) -> None:
    rt = turn(ExpectedTool(name=expected, arguments={"q": "x"}), ordered=True)
    tc = score([ToolCall(name=called, arguments={"q": "x"})], rt)
    assert tc is not None
    assert tc.correct


def test_an_ambiguous_qualified_name_matches_nothing() -> None:
    rt = turn("a-search", "b-search")
    compiled = compile_turn(rt)
    assert compiled is not None
    assert assign_calls([ToolCall(name="search")], compiled) == []
    # and an exact name is never re-read as another one's qualified form
    assert assign_calls([ToolCall(name="a-search")], compiled) == [(0, 0, 1.0)]


def test_expected_agent_is_checked_when_given() -> None:
    rt = turn(
        ExpectedTool(name="book", agent="booking-agent"),
        ExpectedTool(name="weather"),
        ordered=True,
    )
    right = [ToolCall(name="book", agent="booking-agent"), ToolCall(name="weather", agent="x")]
    wrong = [ToolCall(name="book", agent="triage"), ToolCall(name="weather", agent="x")]
    ok, bad = score(right, rt), score(wrong, rt)
    assert ok is not None
    assert ok.correct
    assert bad is not None
    assert not bad.correct
    assert bad.selection == pytest.approx(1 / 3)  # the wrong agent's call pairs with nothing


def _utilization_collecting_first(answer: str | None, calls: list[ToolCall]) -> float | None:
    """What `detect_utilization` computed before it looked call by call: every call's
    values collected (the first `_MAX_LEAVES`), then any of them in the answer."""
    from tracepass.evaluator.scoring.tool_correctness import _AnswerText, _leaves

    leaves: list[Any] = []
    for c in calls:
        if c.error is None:
            _leaves(c.result, leaves)
    if not leaves:
        return None
    if not answer:
        return 0.0
    text = _AnswerText(answer)
    return 1.0 if any(text.contains(leaf) for leaf in leaves) else 0.0


_result_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-50, 50),
        st.floats(-100, 100, allow_nan=False),
        st.sampled_from(["shipped", "ok", "Tuesday", " 32.40 ", "1,200", '{"a": "Paris"}', "[7]"]),
    ),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("ab"), inner),
    max_leaves=6,
)


@settings(max_examples=300, deadline=None)
@given(
    answer=st.one_of(
        st.none(), st.sampled_from(["", "It has shipped, 32.4 USD", "7 in Paris", "1200 ok"])
    ),
    results=st.lists(st.tuples(_result_values, st.booleans()), max_size=5),
)
def test_utilization_looked_up_call_by_call_equals_collecting_first(
    answer: str | None, results: list[tuple[Any, bool]]
) -> None:
    calls = [
        ToolCall(name="t", arguments={}, result=r, error="boom" if failed else None)
        for r, failed in results
    ]
    assert detect_utilization(answer, calls) == _utilization_collecting_first(answer, calls)
