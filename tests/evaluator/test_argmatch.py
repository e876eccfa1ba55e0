"""Argument matchers: deep JSON-style equality and per-key credit."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracepass.evaluator.models import ExpectedTool
from tracepass.evaluator.scoring.argmatch import (
    ArgumentMatchError,
    compile_matcher,
    deep_equal,
    match_arguments,
    validate_matcher_name,
)


def always_half(expected: dict[str, object], actual: dict[str, object]) -> float:
    return 0.5


def says_yes(expected: dict[str, object], actual: dict[str, object]) -> bool:
    return actual.get("x") == expected.get("x")


def broken(expected: dict[str, object], actual: dict[str, object]) -> float:
    raise KeyError("boom")


def out_of_range(expected: dict[str, object], actual: dict[str, object]) -> float:
    return 2.0


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [
        (1, 1.0, True),
        (1, "1", False),
        (True, 1, False),
        (1, True, False),
        (False, 0.0, False),
        (None, None, True),
        (None, 0, False),
        ({"a": [1, {"b": 2}]}, {"a": [1.0, {"b": 2}]}, True),
        ({"a": [1, 2]}, {"a": [2, 1]}, False),
        ({"a": 1}, {"a": 1, "b": 2}, False),
        ([1, 2], (1, 2), True),
        ("x", "x", True),
    ],
)
def test_deep_equal(a: object, b: object, equal: bool) -> None:
    assert deep_equal(a, b) is equal
    assert deep_equal(b, a) is equal


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=10,
)


@settings(deadline=None)
@given(json_values)
def test_deep_equal_reflexive(v: object) -> None:
    assert deep_equal(v, v)


def test_exact_per_key_credit_over_union() -> None:
    exp = {"location": "San Francisco", "units": "celsius"}
    assert match_arguments(exp, exp) == 1.0
    assert match_arguments(exp, {"location": "San Francisco"}) == 0.5
    assert match_arguments(
        exp, {"location": "San Francisco", "units": "celsius", "x": 1}
    ) == pytest.approx(2 / 3)
    assert match_arguments({}, {}) == 1.0
    assert match_arguments({}, {"x": 1}) == 0.0
    assert match_arguments({"flag": 1}, {"flag": True}) == 0.0


def test_ignore_and_unchecked() -> None:
    assert match_arguments({"a": 1}, {"b": 2}, "ignore") == 1.0
    assert match_arguments(None, {"b": 2}, "exact") == 1.0


def test_subset_and_superset() -> None:
    assert match_arguments({"a": 1}, {"a": 1, "b": 2}, "subset") == 1.0
    assert match_arguments({"a": 1, "c": 3}, {"a": 1, "b": 2}, "subset") == 0.5
    assert match_arguments({}, {"a": 1}, "subset") == 1.0
    assert match_arguments({"a": 1, "b": 2}, {"a": 1}, "superset") == 1.0
    assert match_arguments({"a": 1}, {"a": 1, "b": 2}, "superset") == 0.5
    assert match_arguments({"a": 1}, {}, "superset") == 1.0


def test_regex_per_key_fullmatch() -> None:
    exp = {"city": "San .*", "n": r"\d+", "flag": True}
    assert match_arguments(exp, {"city": "San Jose", "n": 42, "flag": True}, "regex") == 1.0
    # fullmatch, not search: "xSan Jose" fails; missing key fails; literal compared deeply
    assert match_arguments(exp, {"city": "xSan Jose", "flag": 1}, "regex") == 0.0
    assert match_arguments(
        exp, {"city": "San Jose", "n": "7a", "flag": True}, "regex"
    ) == pytest.approx(2 / 3)


def test_numeric_tolerance_deep() -> None:
    exp = {"x": 1.0, "pts": [{"y": 100.0}]}
    assert (
        match_arguments(exp, {"x": 1.05, "pts": [{"y": 101}]}, "numeric", abs_tol=0.1, rel_tol=0.0)
        == 0.5
    )
    assert (
        match_arguments(exp, {"x": 1.05, "pts": [{"y": 101}]}, "numeric", abs_tol=0.1, rel_tol=0.02)
        == 1.0
    )
    assert match_arguments({"x": 1}, {"x": True}, "numeric", abs_tol=1.0) == 0.0


def test_custom_callable_by_dotted_path() -> None:
    half = ExpectedTool(name="t", arguments={"x": 1}, argument_match=f"{__name__}:always_half")
    assert compile_matcher(half)({"x": 1}) == 0.5
    yes = ExpectedTool(name="t", arguments={"x": 1}, argument_match=f"{__name__}.says_yes")
    assert compile_matcher(yes)({"x": 1}) == 1.0
    assert compile_matcher(yes)({"x": 2}) == 0.0


@pytest.mark.parametrize(
    ("path", "message"),
    [
        (f"{__name__}:broken", "raised KeyError"),
        (f"{__name__}:out_of_range", "returned 2.0"),
    ],
)
def test_custom_callable_failures_are_errors(path: str, message: str) -> None:
    fn = compile_matcher(ExpectedTool(name="t", arguments={}, argument_match=path))
    with pytest.raises(ArgumentMatchError, match=message):
        fn({})


def test_unresolvable_matchers() -> None:
    assert validate_matcher_name("exakt") is not None
    assert "exact" in (validate_matcher_name("exakt") or "")
    assert validate_matcher_name("pkg.mod:fn") is None
    with pytest.raises(ArgumentMatchError, match="cannot import"):
        compile_matcher(
            ExpectedTool(name="t", argument_match="no_such_pkg_xyz.mod:fn", arguments={})
        )
    with pytest.raises(ArgumentMatchError, match="invalid regex"):
        match_arguments({"a": "("}, {"a": "x"}, "regex")


flat_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-2, 2)
    | st.sampled_from([0.0, 1.0, 2.5])
    | st.sampled_from(["", "a", "1"])
)


@settings(deadline=None, max_examples=300)
@given(
    st.dictionaries(st.sampled_from("abc"), flat_scalars, max_size=3),
    st.dictionaries(st.sampled_from("abc"), flat_scalars | json_values, max_size=3),
)
def test_exact_fast_path_equals_per_key_deep_equal(
    expected: dict[str, object], actual: dict[str, object]
) -> None:
    """`exact` short-cuts with ``==``; bool / int / float look-alikes must not slip through."""
    keys = set(expected) | set(actual)
    good = sum(1 for k in expected if k in actual and deep_equal(expected[k], actual[k]))
    want = 1.0 if not keys else good / len(keys)
    tool = ExpectedTool(name="t", arguments=expected)
    assert compile_matcher(tool)(actual) == want
    # the same values with keys in another order
    assert compile_matcher(tool)(dict(reversed(list(actual.items())))) == want


def test_exact_fast_path_rejects_python_equal_lookalikes() -> None:
    m = compile_matcher(ExpectedTool(name="t", arguments={"a": 1, "b": True, "c": "x"}))
    assert m({"a": 1, "b": True, "c": "x"}) == 1.0
    assert m({"a": True, "b": True, "c": "x"}) == pytest.approx(2 / 3)
    assert m({"a": 1.0, "b": True, "c": "x"}) == 1.0  # 1 == 1.0 in JSON
    assert m({"a": 1, "b": 1, "c": "x"}) == pytest.approx(2 / 3)
    assert m({"b": 1, "a": True, "c": "x"}) == pytest.approx(1 / 3)
