"""Trajectory metrics, including the six examples of the "Agents Companion" evaluation
chapter verbatim, and brute-force checks of the multiset semantics."""

from __future__ import annotations

from collections import Counter
from itertools import combinations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracepass.evaluator.models import ExpectedTool, Reference, ReferenceTurn, ToolCall, Turn
from tracepass.evaluator.scoring.trajectory import (
    conversation_trajectory,
    single_tool_use,
    trajectory_scores,
)


def calls(*names: str) -> list[ToolCall]:
    return [ToolCall(name=n) for n in names]


def ref(*names: str) -> list[ExpectedTool]:
    return [ExpectedTool(name=n) for n in names]


# --------------------------------------------------------------- the six worked examples


def test_companion_exact_match() -> None:
    s = trajectory_scores(
        calls("authenticate", "validate_balance", "process_payment", "send_receipt"),
        ref("authenticate", "validate_balance", "process_payment", "send_receipt"),
    )
    assert s.exact


def test_companion_in_order_match() -> None:
    s = trajectory_scores(
        calls("search_product", "log_search", "add_to_cart", "validate_stock", "checkout"),
        ref("search_product", "add_to_cart", "checkout"),
    )
    assert s.in_order
    assert not s.exact


def test_companion_any_order_match() -> None:
    s = trajectory_scores(
        calls("fetch_calendar", "check_network", "fetch_weather", "fetch_news"),
        ref("fetch_weather", "fetch_news", "fetch_calendar"),
    )
    assert s.any_order
    assert not s.in_order


def test_companion_precision() -> None:
    s = trajectory_scores(
        calls("search_docs", "search_web", "summarize", "log_result"),
        ref("search_docs", "summarize"),
    )
    assert s.precision == 0.50


def test_companion_recall() -> None:
    s = trajectory_scores(
        calls("validate_user", "execute_action", "log_audit"),
        ref("validate_user", "check_permissions", "execute_action", "log_audit"),
    )
    assert s.recall == 0.75


def test_companion_single_tool_use() -> None:
    assert single_tool_use(
        calls("process_request", "update_database", "send_notification"), "send_notification"
    )
    assert not single_tool_use(calls("process_request"), "send_notification")


# --------------------------------------------------------------- edge cases


@pytest.mark.parametrize(
    ("pred", "expected", "p", "r", "f1", "exact", "in_order", "any_order"),
    [
        ((), (), 1.0, 1.0, 1.0, True, True, True),
        ((), ("a",), 0.0, 0.0, 0.0, False, False, False),
        (("a",), (), 0.0, 1.0, 0.0, False, True, True),
        (("a", "a"), ("a",), 0.5, 1.0, 2 / 3, False, True, True),
        (("a",), ("a", "a"), 1.0, 0.5, 2 / 3, False, False, False),
        (("b", "a"), ("a", "b"), 1.0, 1.0, 1.0, False, False, True),
    ],
)
def test_edge_cases(
    pred: tuple[str, ...],
    expected: tuple[str, ...],
    p: float,
    r: float,
    f1: float,
    exact: bool,
    in_order: bool,
    any_order: bool,
) -> None:
    s = trajectory_scores(calls(*pred), ref(*expected))
    assert (s.precision, s.recall) == (p, r)
    assert s.f1 == pytest.approx(f1)
    assert (s.exact, s.in_order, s.any_order) == (exact, in_order, any_order)


def test_name_and_arguments_unit() -> None:
    pred = [ToolCall(name="get", arguments={"id": 1}), ToolCall(name="get", arguments={"id": 2})]
    expected = [
        ExpectedTool(name="get", arguments={"id": 2}),
        ExpectedTool(name="get", arguments={"id": 3}),
    ]
    by_name = trajectory_scores(pred, expected)
    assert by_name.exact
    assert by_name.recall == 1.0
    by_args = trajectory_scores(pred, expected, match="name_and_arguments")
    assert by_args.precision == 0.5
    assert by_args.recall == 0.5
    assert not by_args.any_order


def test_name_and_arguments_needs_matching_not_counting() -> None:
    # subset matchers are not transitive: the first call fits both expectations, the
    # second only the first one. Greedy pairing could pair (0,0) and miss; matching finds 2.
    pred = [ToolCall(name="f", arguments={"a": 1, "b": 2}), ToolCall(name="f", arguments={"a": 1})]
    expected = [
        ExpectedTool(name="f", arguments={"a": 1}, argument_match="subset"),
        ExpectedTool(name="f", arguments={"b": 2}, argument_match="subset"),
    ]
    s = trajectory_scores(pred, expected, match="name_and_arguments")
    assert s.recall == 1.0
    assert s.any_order
    assert not s.in_order  # expected order a→b needs a call fitting b after one fitting a


def test_conversation_trajectory_concatenates_checked_turns() -> None:
    reference = Reference(
        id="r",
        turns=(
            ReferenceTurn(query="q1", expected_tools=(ExpectedTool(name="a"),)),
            ReferenceTurn(query="q2"),  # tools not checked
            ReferenceTurn(query="q3", expected_tools=(ExpectedTool(name="b"),)),
        ),
    )
    turns = [Turn(tool_calls=(ToolCall(name="a"),)), Turn(tool_calls=(ToolCall(name="z"),))]
    s = conversation_trajectory(turns, reference)
    assert s is not None
    assert (s.precision, s.recall) == (1.0, 0.5)  # q3 never reached: b missed
    assert (
        conversation_trajectory(turns, Reference(id="x", turns=(ReferenceTurn(query="q"),))) is None
    )


# --------------------------------------------------------------- brute force

names = st.lists(st.sampled_from("abc"), max_size=6)


def _brute_matched(pred: list[str], expected: list[str]) -> int:
    # largest k such that some k-subset of expected is a sub-multiset of pred
    for k in range(len(expected), -1, -1):
        for sub in combinations(expected, k):
            if not Counter(sub) - Counter(pred):
                return k
    return 0


def _brute_in_order(pred: list[str], expected: list[str]) -> bool:
    return any(
        [pred[i] for i in idx] == expected for idx in combinations(range(len(pred)), len(expected))
    )


@settings(max_examples=300, deadline=None)
@given(names, names)
def test_against_brute_force(pred: list[str], expected: list[str]) -> None:
    s = trajectory_scores(calls(*pred), ref(*expected))
    m = _brute_matched(pred, expected)
    assert s.precision == (m / len(pred) if pred else (1.0 if not expected else 0.0))
    assert s.recall == (m / len(expected) if expected else 1.0)
    assert s.any_order == (m == len(expected))
    assert s.in_order == _brute_in_order(pred, expected)
    assert s.exact == (pred == expected)
    by_args = trajectory_scores(calls(*pred), ref(*expected), match="name_and_arguments")
    assert by_args == s
