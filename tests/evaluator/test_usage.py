"""Turn and conversation figures from timeline spans: sums, nulls with reasons, latency
and percentiles (evaluator/cost_latency.py)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracepass.evaluator.cost_latency import (
    TimelineSpan,
    combine_latency,
    combine_usage,
    latency_of,
    nearest_rank,
    price_spans,
    usage_of,
    version_figures,
    wall_of,
)
from tracepass.evaluator.pricing import ModelPrice, PriceBook

S = 1_000_000_000


def _model(
    n: int, *, inp: int | None = 10, out: int | None = 2, model: str = "m", **kw: object
) -> TimelineSpan:
    return TimelineSpan(
        span_id=f"m{n}",
        kind="model",
        name="chat",
        start_ns=S * n,
        end_ns=S * n + S // 2,
        model=model,
        input_tokens=inp,
        output_tokens=out,
        **kw,  # type: ignore[arg-type]
    )


BOOK = PriceBook({"m": ModelPrice(input_per_mtok=1_000_000, output_per_mtok=1_000_000)})


def test_sums_over_model_calls_and_prices_each() -> None:
    spans = price_spans([_model(1), _model(2, cached_input_tokens=4)], BOOK)
    usage = usage_of([*spans, TimelineSpan(span_id="t", kind="tool", name="x")])
    assert usage.model_calls == 2
    assert (usage.input_tokens, usage.output_tokens) == (20, 4)
    assert usage.cached_input_tokens == 4  # summed over the calls that report it
    assert usage.reasoning_tokens is None  # no call carries it: null, not 0
    assert usage.cost_usd == pytest.approx(24.0)
    assert usage.missing == {}


def test_one_unpriced_call_makes_the_cost_unknown_with_its_reason() -> None:
    spans = price_spans([_model(1), _model(2, model="other")], BOOK)
    usage = usage_of(spans)
    assert usage.cost_usd is None
    assert usage.missing["cost_usd"].startswith("1 of 2 model calls unpriced: unknown_model")


def test_input_tokens_missing_on_some_calls_is_unknown_not_partial() -> None:
    usage = usage_of([_model(1), _model(2, inp=None)])
    assert usage.input_tokens is None
    assert usage.missing["input_tokens"] == "1 of 2 model calls carry no count"
    assert usage.output_tokens == 4


def test_bad_count_reason_is_shown() -> None:
    bad = _model(1, inp=None, missing={"input_tokens": "negative (-3)"})
    usage = usage_of([bad, _model(2)])
    assert usage.input_tokens is None
    assert "negative (-3)" in usage.missing["input_tokens"]


def test_no_model_calls() -> None:
    usage = usage_of([TimelineSpan(span_id="t", kind="turn")])
    assert usage.model_calls == 0
    assert usage.cost_usd is None
    assert usage.input_tokens is None


def test_latency_wall_model_tool_and_slowest_step() -> None:
    turn = TimelineSpan(span_id="turn", kind="turn", name="agent", start_ns=S, end_ns=5 * S)
    model = TimelineSpan(span_id="m", kind="model", name="chat", start_ns=S, end_ns=3 * S)
    tool = TimelineSpan(span_id="t", kind="tool", name="lookup", start_ns=3 * S, end_ns=4 * S)
    broken = TimelineSpan(
        span_id="b", kind="other", start_ns=9 * S, end_ns=S, missing={"duration": "ends before"}
    )
    lat = latency_of([turn, model, tool, broken], ("turn",))
    assert lat.duration_s == pytest.approx(4.0)
    assert (lat.model_s, lat.tool_s) == (pytest.approx(2.0), pytest.approx(1.0))
    assert (lat.slowest_step, lat.slowest_step_s) == ("model: chat", pytest.approx(2.0))
    assert lat.missing["duration"].startswith("1 of 4 spans left out")


def test_combined_usage_and_latency() -> None:
    a = usage_of(price_spans([_model(1)], BOOK))
    b = usage_of(price_spans([_model(2)], BOOK))
    both = combine_usage([a, b])
    assert (both.model_calls, both.input_tokens, both.cost_usd) == (2, 20, pytest.approx(24.0))
    unknown = usage_of(price_spans([_model(3, model="x")], BOOK))
    assert combine_usage([a, unknown]).cost_usd is None
    spans = [_model(1), _model(4)]
    lat = combine_latency(
        [latency_of(spans[:1]), latency_of(spans[1:])], [wall_of(spans[:1]), wall_of(spans[1:])]
    )
    assert lat.duration_s == pytest.approx(3.5)


def test_nearest_rank() -> None:
    assert nearest_rank([], 0.95) is None
    assert nearest_rank([3.0], 0.95) == 3.0
    values = [float(v) for v in range(1, 101)]
    assert nearest_rank(values, 0.95) == 95.0
    assert nearest_rank(values, 0.5) == 50.0


@given(st.lists(st.floats(0, 1e6, allow_nan=False), min_size=1), st.floats(0.01, 1.0))
def test_nearest_rank_is_an_observed_value_with_q_below(values: list[float], q: float) -> None:
    got = nearest_rank(values, q)
    assert got in values
    at_or_below = sum(v <= got for v in values)  # type: ignore[operator]
    assert at_or_below >= math.ceil(q * len(values)) - 1e-9


def test_version_figures_skip_unknowns() -> None:
    fig = version_figures([1.0, None, 3.0], [2.0, 4.0, None])
    assert (fig.conversations, fig.priced) == (3, 2)
    assert fig.cost_usd_mean == pytest.approx(2.0)
    assert fig.cost_usd_total == pytest.approx(4.0)
    assert fig.duration_s_p95 == 4.0
