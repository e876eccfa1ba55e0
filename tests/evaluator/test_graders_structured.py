"""regex, numeric, json_match and constraint graders, and their helpers."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracepass.evaluator.graders import GradeInput, GraderConfigError, Verdict, build_grader
from tracepass.evaluator.graders.jsonfind import find_json, json_equal
from tracepass.evaluator.graders.jsonpath import parse_path, resolve
from tracepass.evaluator.graders.numbers import find_numbers
from tracepass.evaluator.models import GraderSpec


async def run(type_: str, answer: str, expected: str | None = None, /, **opts: Any) -> Verdict:
    grader = build_grader(GraderSpec(type=type_, **opts))
    return await grader.grade(
        GradeInput(query="q", answer=answer, expected=expected, threshold=0.7)
    )


# ----------------------------------------------------------------------------- regex


async def test_regex_search_and_fullmatch() -> None:
    assert (await run("regex", "Order #A-123 shipped", pattern=r"#A-\d+")).passed is True
    assert (
        await run("regex", "Order #A-123 shipped", pattern=r"#A-\d+", match="fullmatch")
    ).passed is False
    assert (await run("regex", "  A-123 \n", pattern=r"A-\d+", match="fullmatch")).passed is True


async def test_regex_modes_flags_negate() -> None:
    v = await run("regex", "abc", patterns=["a", "z"])
    assert (v.score, v.passed) == (0.5, False)
    v = await run("regex", "abc", patterns=["a", "z"], mode="any")
    assert (v.score, v.passed) == (1.0, True)
    assert (await run("regex", "ABC", pattern="abc", ignorecase=True)).passed is True
    assert (await run("regex", "all fine", pattern="Traceback", negate=True)).passed is True
    assert (await run("regex", "Traceback (most", pattern="Traceback", negate=True)).passed is False


def test_regex_config_errors() -> None:
    with pytest.raises(GraderConfigError, match="set 'pattern' or 'patterns'"):
        build_grader(GraderSpec(type="regex"))
    with pytest.raises(GraderConfigError, match="invalid regular expression '\\('"):
        build_grader(GraderSpec(type="regex", pattern="("))


# ----------------------------------------------------------------------------- numbers


@pytest.mark.parametrize(
    ("text", "values"),
    [
        ("1,234.5", [1234.5]),
        ("total 32.40 EUR", [32.4]),
        ("-3 degrees", [-3.0]),
        ("1e3 items", [1000.0]),
        ("2.5E-4", [0.00025]),
        ("45%", [45.0]),
        ("x = \u22127", [-7.0]),
        ("2020-2021", [2020.0, 2021.0]),
        ("1,2345", [1.0, 2345.0]),
        ("1,2,3", [1.0, 2.0, 3.0]),
        (".5 and +2", [0.5, 2.0]),
        ("A12 x2 v1.2 (3)", [3.0]),
        ("$1,200,000.", [1200000.0]),
        ("３２", [32.0]),
        ("no numbers", []),
    ],
)
def test_find_numbers(text: str, values: list[float]) -> None:
    assert [n.value for n in find_numbers(text)] == pytest.approx(values)


def test_find_numbers_percent_flag() -> None:
    (n,) = find_numbers("rate 4.5 %")
    assert n.percent
    assert n.value == 4.5


@given(st.integers(min_value=-(10**12), max_value=10**12))
def test_find_numbers_roundtrips_formatted_integers(n: int) -> None:
    assert [x.value for x in find_numbers(f"value {n:,} units")] == [float(n)]


@given(st.floats(allow_nan=False, allow_infinity=False, width=64))
def test_find_numbers_roundtrips_repr(x: float) -> None:
    assert [n.value for n in find_numbers(f"is {x!r}.")] == [x]


# ----------------------------------------------------------------------------- numeric


async def test_numeric_from_expected_answer() -> None:
    v = await run("numeric", "It costs $1,234.50 in total.", "1234.5")
    assert (v.score, v.passed) == (1.0, True)
    v = await run("numeric", "It is 1234", "1234.5")
    assert (v.score, v.passed) == (0.0, False)


async def test_numeric_tolerances() -> None:
    assert (await run("numeric", "3.14", "3.14159", abs_tol=0.01)).passed is True
    assert (await run("numeric", "3.14", "3.14159", abs_tol=0.001)).passed is False
    assert (await run("numeric", "101", "100", rel_tol=0.01)).passed is True
    assert (await run("numeric", "102", "100", rel_tol=0.01)).passed is False


async def test_numeric_multiset_matching() -> None:
    # one 42 cannot satisfy two expected 42s
    v = await run("numeric", "42", None, expected=[42, 42])
    assert (v.score, v.passed) == (0.5, False)
    # greedy would pair 5.1→5.05 (first fit) and leave 5.0 unmatched; maximum matching
    # pairs 5.0→5.05 and 5.1→5.2
    v = await run("numeric", "5.05 and 5.2", None, expected=[5.1, 5.0], abs_tol=0.11)
    assert (v.score, v.passed) == (1.0, True)


async def test_numeric_percent_modes() -> None:
    assert (await run("numeric", "45%", None, expected=0.45)).passed is True
    assert (await run("numeric", "45%", None, expected=45)).passed is True
    assert (await run("numeric", "45%", None, expected=0.45, percent="as_written")).passed is False
    assert (await run("numeric", "45%", None, expected=45, percent="fraction")).passed is False


async def test_numeric_any_and_errors() -> None:
    v = await run("numeric", "7", None, expected=[7, 8], mode="any")
    assert (v.score, v.passed) == (1.0, True)
    v = await run("numeric", "7", "no digits here")
    assert v.error is not None
    assert v.score is None
    with pytest.raises(GraderConfigError, match="option 'abs_tol'"):
        build_grader(GraderSpec(type="numeric", abs_tol=-1))


# ----------------------------------------------------------------------------- json


def test_json_equal_rules() -> None:
    assert json_equal(1, 1.0)
    assert not json_equal(1, "1")
    assert not json_equal(True, 1)
    assert not json_equal(False, 0)
    assert json_equal({"a": [1, {"b": None}]}, {"a": [1.0, {"b": None}]})
    assert not json_equal({"a": 1}, {"a": 1, "b": 2})
    assert not json_equal([1, 2], [2, 1])
    assert not json_equal(None, 0)
    assert json_equal(float("nan"), float("nan"))


def test_parse_path() -> None:
    assert parse_path("a.b[0].c") == ("a", "b", 0, "c")
    assert parse_path("$.items[-1]") == ("items", -1)
    assert parse_path('$["key.with.dots"].x') == ("key.with.dots", "x")
    assert parse_path("['k']") == ("k",)
    assert parse_path("[0][1]") == (0, 1)
    for bad in ("a..b", "a[", "a[x]", "a.", "a[0]b"):
        with pytest.raises(ValueError, match="path"):
            parse_path(bad)


def test_resolve() -> None:
    doc = {"a": [{"b": 1}, {"b": 2}]}
    assert resolve(doc, ("a", 1, "b")) == (True, 2)
    assert resolve(doc, ("a", 2, "b"))[0] is False
    assert resolve(doc, ("a", "b"))[0] is False
    assert resolve({"0": 1}, (0,))[0] is False


def test_find_json_variants() -> None:
    assert find_json('{"a": 1}') == (True, {"a": 1})
    assert find_json('Here:\n```json\n{"a": 2}\n```\nbye') == (True, {"a": 2})
    assert find_json('The result is {"a": 3} as requested') == (True, {"a": 3})
    assert find_json("no json {here") == (False, None)


async def test_json_match_fields() -> None:
    answer = 'Result:\n```json\n{"order": {"id": 7, "items": [{"sku": "A"}], "paid": true}}\n```'
    v = await run(
        "json_match",
        answer,
        fields={"order.id": 7.0, "order.items[0].sku": "A", "order.paid": True},
    )
    assert (v.score, v.passed) == (1.0, True)
    v = await run("json_match", answer, fields={"order.id": "7", "order.paid": 1, "order.x": 1})
    assert v.score == 0.0
    assert v.reasoning is not None
    assert "order.x: missing" in v.reasoning


async def test_json_match_whole_document_and_errors() -> None:
    assert (await run("json_match", '{"a": [1, 2]}', '{"a": [1.0, 2]}')).passed is True
    assert (await run("json_match", "no json", '{"a": 1}')).passed is False
    assert (await run("json_match", '{"a": 1}', "not json")).error is not None
    with pytest.raises(GraderConfigError, match=r"fields: malformed bracket"):
        build_grader(GraderSpec(type="json_match", fields={"a[": 1}))


# ----------------------------------------------------------------------------- constraint


async def test_constraint_checks() -> None:
    v = await run("constraint", "  one two three  ", min_words=2, max_words=3, max_length=13)
    assert (v.score, v.passed) == (1.0, True)
    v = await run("constraint", "one two three four", max_words=3, min_length=1)
    assert (v.score, v.passed) == (0.5, False)
    assert (await run("constraint", '{"a": 1}', format="json")).passed is True
    assert (await run("constraint", '```json\n{"a": 1}\n```', format="json")).passed is False
    assert (await run("constraint", "a\nb", format="one-line")).passed is False
    assert (await run("constraint", "ok ", format="one-line")).passed is True
    assert (await run("constraint", "AB-12", format="regex", pattern=r"[A-Z]+-\d+")).passed is True


def test_constraint_config_errors() -> None:
    with pytest.raises(GraderConfigError, match="set at least one"):
        build_grader(GraderSpec(type="constraint"))
    with pytest.raises(GraderConfigError, match=r"min_words \(5\) is greater than max_words \(2\)"):
        build_grader(GraderSpec(type="constraint", min_words=5, max_words=2))
    with pytest.raises(GraderConfigError, match="'pattern' is required"):
        build_grader(GraderSpec(type="constraint", format="regex"))
    with pytest.raises(GraderConfigError, match="option 'format'"):
        build_grader(GraderSpec(type="constraint", format="yaml"))
