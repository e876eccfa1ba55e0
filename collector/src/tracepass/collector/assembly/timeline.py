"""A turn's spans as timeline entries, priced, and its tokens, cost and latency.

Runs once per built conversation (`build.py`), from the records assembly already holds:
the figures' rules live in `tracepass.evaluator.cost_latency`, the prices in
`tracepass.evaluator.pricing`; this module only maps records to `TimelineSpan`s. Entries
are built unchecked (every field given) like the turns themselves: their values come
from typed records.

Every span counts towards the figures, but a turn stores for the timeline only its own
span, agent steps, model and tool calls and failed spans (at most `MAX_TIMELINE_SPANS`):
other spans are framework internals, and storing them tripled a stored conversation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from tracepass.collector.normalize import MAX_SPAN_DURATION_NS, model_of, timing_problem
from tracepass.collector.records import RecordKind, SpanRecord
from tracepass.evaluator.cost_latency import (
    KIND_MODEL,
    KIND_OTHER,
    KIND_TOOL,
    KIND_TURN,
    Latency,
    TimelineSpan,
    Usage,
    latency_of,
    usage_of,
    wall_of,
)
from tracepass.evaluator.models import construct_unchecked
from tracepass.evaluator.pricing import MISSING_MODEL, PriceBook, TokenUsage

__all__ = ["DEFAULT_PRICES", "MAX_TIMELINE_SPANS", "turn_figures", "turn_timeline"]

MAX_TIMELINE_SPANS: Final = 200
# Library prices only: what a build without configured prices (`tracepass inspect`,
# tests) uses.
DEFAULT_PRICES: Final = PriceBook()

_KINDS: Final = {
    RecordKind.TURN: KIND_TURN,
    RecordKind.MODEL: KIND_MODEL,
    RecordKind.TOOL: KIND_TOOL,
}


def _entry(rec: SpanRecord, book: PriceBook) -> TimelineSpan:
    kind = _KINDS.get(rec.kind, KIND_OTHER)
    missing: dict[str, str] = {}
    start, end = rec.start_ns, rec.end_ns
    if start <= 0 or end < start or end - start > MAX_SPAN_DURATION_NS:
        missing["duration"] = timing_problem(start, end) or "unusable start/end times"
    model: str | None = None
    provider: str | None = None
    counts: list[int | None] = [None, None, None, None]
    cost: float | None = None
    if kind == KIND_MODEL:
        model = model_of(rec.attributes)
        usage = rec.usage
        if usage is not None:
            provider = usage.provider
            counts = [
                usage.input_tokens,
                usage.output_tokens,
                usage.cached_input_tokens,
                usage.reasoning_tokens,
            ]
            if usage.problem is not None:
                for note in usage.problem.split("; "):
                    name, _, why = note.partition(": ")
                    missing[name] = why
        if any(name in missing for name in ("input_tokens", "output_tokens")):
            missing["cost_usd"] = "invalid_usage"
        else:
            priced = book.price(
                model, TokenUsage(*counts), provider=provider, at_ns=rec.start_ns or None
            )
            cost = priced.cost_usd
            if cost is None:
                reason = priced.reason or "unknown"
                missing["cost_usd"] = (
                    f"{reason}: {model}" if model and reason != MISSING_MODEL else reason
                )
    values: dict[str, Any] = {
        "span_id": rec.span_id,
        "parent_span_id": rec.parent_span_id,
        "kind": kind,
        "name": rec.tool_name if kind == KIND_TOOL and rec.tool_name else rec.name,
        "start_ns": rec.start_ns,
        "end_ns": rec.end_ns,
        "error": rec.error,
        "model": model,
        "provider": provider,
        "input_tokens": counts[0],
        "output_tokens": counts[1],
        "cached_input_tokens": counts[2],
        "reasoning_tokens": counts[3],
        "cost_usd": cost,
        "missing": missing,
    }
    return construct_unchecked(TimelineSpan, values)


def turn_timeline(
    root: SpanRecord, members: Sequence[SpanRecord], book: PriceBook
) -> tuple[TimelineSpan, ...]:
    """Every span of the turn (its own first, the rest in start order), priced."""
    return (_entry(root, book), *(_entry(r, book) for r in members if r is not root))


def _kept(spans: tuple[TimelineSpan, ...]) -> tuple[TimelineSpan, ...]:
    """What the turn stores for the timeline: its own span, agent steps (nested turns),
    model and tool calls, and failed spans, at most `MAX_TIMELINE_SPANS` in start
    order. Other spans (framework internals: graph nodes, event-loop cycles) count in
    the figures but are not stored: they were most of a stored conversation's bytes."""
    kept = tuple(s for s in spans if s.kind != KIND_OTHER or s.error is not None)
    return kept[:MAX_TIMELINE_SPANS]


def turn_figures(
    root: SpanRecord, members: Sequence[SpanRecord], book: PriceBook
) -> tuple[tuple[TimelineSpan, ...], Usage, Latency, tuple[int, int] | None]:
    """The turn's stored timeline entries, and its usage, latency and wall (first start,
    last end) over all its spans."""
    spans = turn_timeline(root, members, book)
    return _kept(spans), usage_of(spans), latency_of(spans, (root.span_id,)), wall_of(spans)
