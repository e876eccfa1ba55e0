"""The one-pass conversation build gives the very conversations the build before it gave.

The build folds every record into the turn's usage, latency and wall as it reads it
(`cost_latency.SpanFold`), builds a `TimelineSpan` only for the spans a turn stores,
and reads the tool calls of a turn without model requests in one loop. The build before
it (`_build_before.py`: the branch point's code, verbatim) is the oracle: patched into
`assembly/build.py`, it must give equal conversations — every field equal (costs and
durations exactly, as floats), the same JSON (key order included: `missing` maps, the
stored format) and the same `arguments_source` — on every committed OTLP corpus in
`tests/` and on random record sets (hypothesis: nested turns, model calls with good,
partial, bad and unpriced usage, unusable times, failed framework spans, model requests
and responses to pair, more spans than the timeline keeps).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import _build_before as before
import pytest
from _pipeline_support import MODEL, OTHER, TOOL, TURN, rec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tracepass.collector.assembly.build as build
from tracepass.collector.app.cli.sources import conversations_from_otlp
from tracepass.collector.assembly import DEFAULT_PRICES
from tracepass.collector.normalize import (
    MAX_SPAN_DURATION_NS,
    ROLE_ATTR,
    ROLE_HANDOFF,
    TOOL_RESPONSES_ATTR,
)
from tracepass.collector.records import ModelUsage, RecordKind, SpanRecord
from tracepass.evaluator import cost_latency as now
from tracepass.evaluator.cost_latency import Latency, TimelineSpan, Usage
from tracepass.evaluator.models import Conversation, ToolCall
from tracepass.evaluator.pricing import ModelPrice, PriceBook

TESTS = Path(__file__).resolve().parent.parent
CORPUS_FILES = sorted(
    [
        *(TESTS / "frameworks" / "corpus").glob("*.otlp.jsonl"),
        *(TESTS / "data" / "otlp").glob("trace*.*"),
        *(TESTS / "data" / "otlp" / "thirdparty").glob("*.binpb"),
    ]
)
# Every name the build looks up that the one-pass build replaced.
_BEFORE: dict[str, Callable[..., Any]] = {
    "turn_figures": before.turn_figures,
    "combine_usage": before.combine_usage,
    "combine_latency": before.combine_latency,
    "tool_calls": before.tool_calls,
    "_offered_tools": before._offered_tools,
    "_tool_schemas": before._tool_schemas,
}
BOOK = PriceBook(
    {"priced": ModelPrice(input_per_mtok=3.0, output_per_mtok=15.0, cached_input_per_mtok=0.3)}
)


@contextmanager
def built_before() -> Iterator[None]:
    """`build_conversation` as it was (a context manager, not `monkeypatch`: hypothesis
    runs many examples in one test function)."""
    saved = {name: getattr(build, name) for name in _BEFORE}
    for name, old in _BEFORE.items():
        setattr(build, name, old)
    try:
        yield
    finally:
        for name, current in saved.items():
            setattr(build, name, current)


def _field_order(model: Any, cls: type[Any]) -> None:
    assert type(model) is cls
    assert list(model.__dict__) == list(cls.model_fields)


def assert_same(new: Conversation, old: Conversation) -> None:
    assert new == old  # every field, nested models and floats exactly
    assert new.model_dump_json() == old.model_dump_json()  # key order: the stored JSON
    for conv in (new, old):
        for part in (conv.usage, *(t.usage for t in conv.turns)):
            _field_order(part, Usage)
        for part in (conv.latency, *(t.latency for t in conv.turns)):
            _field_order(part, Latency)
        for turn in conv.turns:
            for span in turn.spans:
                _field_order(span, TimelineSpan)
            for call in turn.tool_calls:
                _field_order(call, ToolCall)
    sources = [[c.arguments_source for c in t.tool_calls] for t in new.turns]
    assert sources == [[c.arguments_source for c in t.tool_calls] for t in old.turns]


def test_the_oracle_is_the_build_before() -> None:
    """The patch takes: the old build really runs the copies (else every comparison
    below would compare the new build with itself)."""
    calls: list[str] = []
    figures = _BEFORE["turn_figures"]

    def counted(*args: Any) -> Any:
        calls.append("figures")
        return figures(*args)

    records = [rec(1, 1, None, TURN, start=1, conv="c"), rec(1, 2, 1, TOOL, start=2, conv="c")]
    with built_before():
        build.turn_figures = counted
        build.build_conversation("c", records)
    assert calls == ["figures"]
    assert build.turn_figures is not figures
    assert build.turn_figures is not counted


@pytest.mark.parametrize("path", CORPUS_FILES, ids=lambda p: p.name)
@pytest.mark.parametrize("prices", [None, BOOK], ids=["library-prices", "configured-prices"])
def test_every_committed_corpus_builds_the_same(path: Path, prices: PriceBook | None) -> None:
    new = conversations_from_otlp([path], prices=prices)
    with built_before():
        old = conversations_from_otlp([path], prices=prices)
    assert new, path
    assert [c.id for c in new] == [c.id for c in old]
    for a, b in zip(new, old, strict=True):
        assert_same(a, b)


def test_more_spans_than_the_timeline_keeps() -> None:
    """250 tool calls and failed framework spans: the first 200 kept, every one counted."""
    records = [rec(1, 1, None, TURN, start=1, end=10**9, conv="c", input_text="q")]
    for i in range(250):
        records.append(rec(1, 10 + i, 1, TOOL, start=2 + i, conv="c", tool_name=f"t{i % 7}"))
        records.append(
            rec(1, 1000 + i, 1, OTHER, start=3 + i, conv="c", error="boom" if i % 3 else None)
        )
    new = build.build_conversation("c", records, prices=BOOK)
    with built_before():
        old = build.build_conversation("c", records, prices=BOOK)
    assert_same(new, old)
    assert len(new.turns[0].spans) == 200


# ------------------------------------------------------------------ random record sets

_S = 1_000_000_000
_TIMES = st.one_of(
    st.integers(1, 50).map(lambda k: 1_700_000_000 * _S + k * _S // 10),  # usual
    st.sampled_from([0, -5, 1]),  # unset, negative, just after the epoch
)
_LENGTHS = st.one_of(
    st.integers(0, 30).map(lambda k: k * _S // 20),
    st.sampled_from([-_S, MAX_SPAN_DURATION_NS + 1, MAX_SPAN_DURATION_NS]),
)
_COUNTS = st.none() | st.integers(0, 5000)
_PROBLEMS = st.none() | st.lists(
    st.sampled_from(
        [
            "input_tokens: negative (-3)",
            "output_tokens: not a number ('x')",
            "cached_input_tokens: too large",
            "reasoning_tokens: negative (-1)",
        ]
    ),
    min_size=1,
    max_size=2,
    unique=True,
).map("; ".join)
_USAGE = st.none() | st.builds(
    ModelUsage,
    _COUNTS,
    _COUNTS,
    _COUNTS,
    _COUNTS,
    st.none() | st.sampled_from(["openai", "anthropic", "bogus"]),
    _PROBLEMS,
)
_MODELS = st.sampled_from([None, "priced", "PRICED", "unknown-model", "gpt-4o", ""])
_TOOLS = st.sampled_from(["lookup", "book", "notify"])
_JSON = st.none() | st.integers(-3, 3) | st.text(max_size=4) | st.lists(st.integers(), max_size=2)


@st.composite
def _span(draw: st.DrawFn, trace: int, span: int, parent: int | None, conv: str) -> SpanRecord:
    kind = draw(st.sampled_from([TURN, TOOL, TOOL, MODEL, MODEL, OTHER]))
    start = draw(_TIMES)
    kw: dict[str, Any] = {
        "start": start,
        "end": start + draw(_LENGTHS),
        "conv": conv,
        "error": draw(st.none() | st.just("failed")),
    }
    if kind is TURN:
        kw["input_text"] = draw(st.none() | st.sampled_from(["q1", "q2"]))
        kw["output_text"] = draw(st.none() | st.just("answer"))
        kw["agent_name"] = draw(st.none() | st.sampled_from(["planner", "worker"]))
    elif kind is TOOL:
        kw["tool_name"] = draw(st.none() | _TOOLS)
        kw["tool_call_id"] = draw(st.none() | st.sampled_from(["c1", "c2", "c3"]))
        kw["tool_arguments"] = draw(
            st.none() | st.dictionaries(st.sampled_from(["x", "_raw", "city"]), _JSON, max_size=2)
        )
        kw["tool_result"] = draw(_JSON)
    elif kind is MODEL:
        model = draw(_MODELS)
        kw["attributes"] = {} if model is None else {"gen_ai.request.model": model}
        kw["usage"] = draw(_USAGE)
        kw["input_text"] = draw(st.none() | st.sampled_from(["q1", "q3"]))
        kw["output_text"] = draw(st.none() | st.just("model says"))
        calls = draw(
            st.lists(
                st.builds(
                    ToolCall,
                    name=_TOOLS,
                    arguments=st.dictionaries(st.sampled_from(["x", "city"]), _JSON, max_size=2),
                    call_id=st.none() | st.sampled_from(["c1", "c2", "c3"]),
                ),
                max_size=2,
            )
        )
        kw["requested_tool_calls"] = tuple(calls)
        if draw(st.booleans()):
            responses = draw(st.dictionaries(st.sampled_from(["c1", "c2"]), _JSON, max_size=2))
            kw["attributes"][TOOL_RESPONSES_ATTR] = responses
    elif draw(st.booleans()):
        kw["attributes"] = {ROLE_ATTR: ROLE_HANDOFF}
        kw["agent_name"] = "worker"
    return rec(trace, span, parent, kind, name=draw(st.sampled_from(["a", "b"])), **kw)


@st.composite
def conversations(draw: st.DrawFn) -> list[SpanRecord]:
    records: list[SpanRecord] = []
    span = 0
    for trace in range(1, draw(st.integers(1, 3)) + 1):
        ids: list[int] = []
        for _ in range(draw(st.integers(1, 9))):
            span += 1
            # The first span of a trace is its root (or, sometimes, parentless too);
            # the others hang below an earlier span of the trace, or a missing one.
            parent = None if not ids else draw(st.sampled_from([*ids, ids[0], 9_999]))
            record = draw(_span(trace, span, parent, "c"))
            if not ids and draw(st.booleans()):
                record = dataclasses.replace(record, kind=RecordKind.TURN)
            ids.append(span)
            records.append(record)
    return draw(st.permutations(records))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=conversations(), configured=st.booleans(), complete=st.booleans())
def test_random_record_sets_build_the_same(
    records: list[SpanRecord], configured: bool, complete: bool
) -> None:
    prices = BOOK if configured else DEFAULT_PRICES
    new = build.build_conversation("c", records, complete=complete, prices=prices)
    with built_before():
        old = build.build_conversation("c", records, complete=complete, prices=prices)
    assert_same(new, old)


# ------------------------------------------------- the figures over `TimelineSpan`s too

_TIMELINE_SPANS = st.lists(
    st.builds(
        TimelineSpan,
        span_id=st.sampled_from(["r", "a", "b", "c"]),
        kind=st.sampled_from(["turn", "model", "tool", "other"]),
        name=st.sampled_from(["x", "y"]),
        start_ns=_TIMES,
        end_ns=_TIMES,
        input_tokens=_COUNTS,
        output_tokens=_COUNTS,
        cached_input_tokens=_COUNTS,
        reasoning_tokens=_COUNTS,
        cost_usd=st.none() | st.floats(0, 10, allow_nan=False),
        missing=st.dictionaries(
            st.sampled_from(["input_tokens", "output_tokens", "duration", "cost_usd", "other"]),
            st.sampled_from(["", "why", "because"]),
            max_size=3,
        ),
    ),
    max_size=8,
)


@settings(max_examples=300, deadline=None)
@given(turns=st.lists(_TIMELINE_SPANS, max_size=4))
def test_usage_latency_and_wall_of_timeline_spans_are_unchanged(
    turns: list[list[TimelineSpan]],
) -> None:
    """`usage_of`, `latency_of`, `wall_of` (now through `SpanFold`) and the combining of
    turns, on any timeline spans, equal the functions before it."""
    for spans in turns:
        assert now.usage_of(spans).model_dump_json() == before.usage_of(spans).model_dump_json()
        assert now.latency_of(spans, ("r",)) == before.latency_of(spans, ("r",))
        assert now.latency_of(spans).model_dump_json() == before.latency_of(spans).model_dump_json()
        assert now.wall_of(spans) == before.wall_of(spans)
    usages = [before.usage_of(s) for s in turns]
    latencies = [before.latency_of(s, ("r",)) for s in turns]
    walls = [before.wall_of(s) for s in turns]
    assert now.combine_usage(usages) == before.combine_usage(usages)
    assert (
        now.combine_usage(usages).model_dump_json()
        == before.combine_usage(usages).model_dump_json()
    )
    assert now.combine_latency(latencies, walls) == before.combine_latency(latencies, walls)
    assert (
        now.combine_latency(latencies, walls).model_dump_json()
        == before.combine_latency(latencies, walls).model_dump_json()
    )
