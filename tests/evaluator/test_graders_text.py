"""exact and contains graders, and the shared normalization."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracepass.evaluator.graders import GradeInput, GraderConfigError, Verdict, build_grader
from tracepass.evaluator.graders.text import Normalization, normalize, normalizer
from tracepass.evaluator.models import GraderSpec


async def run(type_: str, answer: str, expected: str | None = None, /, **opts: Any) -> Verdict:
    grader = build_grader(GraderSpec(type=type_, **opts))
    return await grader.grade(
        GradeInput(query="q", answer=answer, expected=expected, threshold=0.7)
    )


def test_normalize_order() -> None:
    opts = Normalization(nfkc=True, casefold=True, strip_punctuation=True, whitespace=True)
    assert normalize("  Ｈｅｌｌｏ,\u00a0 World!! ", opts) == "hello world"
    assert normalize("$1,200", opts) == "1200"
    assert normalize("ﬁne", Normalization(nfkc=True)) == "fine"
    assert normalize("ﬁne", Normalization(nfkc=False)) == "ﬁne"


@pytest.mark.parametrize(
    ("answer", "expected", "opts", "passed"),
    [
        ("Paris", "Paris", {}, True),
        ("  Paris \n", "Paris", {}, True),
        ("paris", "Paris", {}, False),
        ("paris", "Paris", {"casefold": True}, True),
        ("Paris.", "Paris", {}, False),
        ("Paris.", "Paris", {"strip_punctuation": True}, True),
        ("a  b", "a b", {"whitespace": False}, False),
        ("Lutetia", "Paris", {"alternatives": ["Lutetia"]}, True),
    ],
)
async def test_exact(answer: str, expected: str, opts: dict[str, Any], passed: bool) -> None:
    v = await run("exact", answer, expected, **opts)
    assert v.passed is passed
    assert v.score == (1.0 if passed else 0.0)


async def test_exact_expected_option_overrides() -> None:
    v = await run("exact", "42", "The answer is 42", expected="42")
    assert v.passed is True


async def test_exact_without_expected_is_error() -> None:
    v = await run("exact", "42", None)
    assert v.error is not None
    assert v.score is None


async def test_contains_default_phrase() -> None:
    assert (await run("contains", "It is NOT approved", "not approved")).passed is True
    v = await run("contains", "approved, not denied", "not approved")
    assert v.passed is False
    assert v.score == 0.0


async def test_contains_keywords_all_partial_score() -> None:
    v = await run("contains", "red and green", None, keywords=["red", "green", "blue"])
    assert v.score == pytest.approx(2 / 3)
    assert v.passed is False
    assert v.reasoning is not None
    assert "blue" in v.reasoning


async def test_contains_any() -> None:
    v = await run("contains", "just blue", None, keywords=["red", "blue"], mode="any")
    assert (v.score, v.passed) == (1.0, True)
    v = await run("contains", "nothing", None, keywords=["red", "blue"], mode="any")
    assert (v.score, v.passed) == (0.0, False)


async def test_contains_split_expected_and_whole_words() -> None:
    v = await run(
        "contains", "Paris has 2.1 million people", "Paris; 2.1 million", split_expected=True
    )
    assert v.passed is True
    v = await run("contains", "concatenate", None, keywords=["cat"], whole_words=True)
    assert v.passed is False
    v = await run("contains", "a cat.", None, keywords=["cat"], whole_words=True)
    assert v.passed is True


async def test_contains_case_sensitive_option() -> None:
    assert (await run("contains", "paris", "Paris", casefold=False)).passed is False


def test_option_errors_are_precise() -> None:
    with pytest.raises(GraderConfigError, match=r"grader 'contains' option 'keywords': "):
        build_grader(GraderSpec(type="contains", keywords=[]))
    with pytest.raises(GraderConfigError, match=r"option 'keywords\[1\]'"):
        build_grader(GraderSpec(type="contains", keywords=["a", 3]))
    with pytest.raises(GraderConfigError, match=r"option 'mod': unknown option \(allowed: "):
        build_grader(GraderSpec(type="contains", mod="all"))
    with pytest.raises(GraderConfigError, match="unknown grader type"):
        build_grader(GraderSpec(type="fuzzy"))


@given(
    st.text(max_size=60),
    st.booleans(),
    st.booleans(),
    st.booleans(),
    st.booleans(),
)
def test_normalize_is_idempotent(text: str, nfkc: bool, fold: bool, punct: bool, ws: bool) -> None:
    opts = Normalization(nfkc=nfkc, casefold=fold, strip_punctuation=punct, whitespace=ws)
    once = normalize(text, opts)
    assert normalize(once, opts) == once


@given(
    st.text(max_size=60),
    st.booleans(),
    st.booleans(),
    st.booleans(),
    st.booleans(),
)
def test_specialised_normalizer_equals_normalize(
    text: str, nfkc: bool, fold: bool, punct: bool, ws: bool
) -> None:
    opts = Normalization(nfkc=nfkc, casefold=fold, strip_punctuation=punct, whitespace=ws)
    assert normalizer(opts)(text) == normalize(text, opts)


@given(
    st.text(max_size=30),
    st.lists(st.text(max_size=8), min_size=1, max_size=3),
    st.sampled_from(["all", "any"]),
    st.booleans(),
)
def test_contains_sync_and_async_agree_with_a_plain_reading(
    answer: str, keywords: list[str], mode: str, whole_words: bool
) -> None:
    """The precomputed single-keyword verdicts and the general loop give what the
    option text says, through both `grade_sync` and the coroutine."""
    spec = GraderSpec(type="contains", keywords=keywords, mode=mode, whole_words=whole_words)
    try:
        g = build_grader(spec)
    except GraderConfigError:
        return
    inp = GradeInput(query=None, answer=answer, expected=None, threshold=0.7)
    opts = Normalization(nfkc=True, casefold=True)
    text = normalize(answer, opts)
    kws = [k for k in (normalize(k, opts) for k in keywords) if k]
    v = g.grade_sync(inp)
    coro = g.grade(inp)
    with pytest.raises(StopIteration) as stop:
        coro.send(None)
    assert stop.value.value == v
    if not kws:
        assert v.error is not None
        return

    def found(k: str) -> bool:
        if whole_words:
            return re.search(rf"(?<!\w){re.escape(k)}(?!\w)", text) is not None
        return k in text

    hits = [found(k) for k in kws]
    assert v.passed is (any(hits) if mode == "any" else all(hits))
    assert v.score == (float(any(hits)) if mode == "any" else sum(hits) / len(kws))
    assert v.reasoning is not None
    assert v.reasoning.startswith(f"found {sum(hits)}/{len(kws)}")
