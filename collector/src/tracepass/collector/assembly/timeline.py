"""A turn's spans as timeline entries, priced, and its tokens, cost and latency.

Runs once per built conversation (`build.py`), from the records assembly already holds,
in one pass: the figures' rules live in `tracepass.evaluator.cost_latency` (`SpanFold`),
the prices in `tracepass.evaluator.pricing`; this module only reads the records and
maps the stored ones to `TimelineSpan`s. Entries are built unchecked (every field given)
like the turns themselves: their values come from typed records.

Every span counts towards the figures, but a turn stores for the timeline only its own
span, agent steps, model and tool calls and failed spans (at most `MAX_TIMELINE_SPANS`):
other spans are framework internals, and storing them tripled a stored conversation.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain
from typing import Final

from tracepass.collector.normalize import MAX_SPAN_DURATION_NS, model_of, timing_problem
from tracepass.collector.records import RecordKind, SpanRecord
from tracepass.evaluator.cost_latency import (
    COST_PRICES,
    COST_SPAN,
    KIND_MODEL,
    KIND_OTHER,
    KIND_TOOL,
    KIND_TURN,
    Latency,
    SpanFold,
    TimelineSpan,
    Usage,
)
from tracepass.evaluator.models import construct_unchecked
from tracepass.evaluator.pricing import MISSING_MODEL, PriceBook, TokenUsage

__all__ = ["DEFAULT_PRICES", "MAX_TIMELINE_SPANS", "turn_figures"]

MAX_TIMELINE_SPANS: Final = 200
# Library prices only: what a build without configured prices (`tracepass inspect`,
# tests) uses.
DEFAULT_PRICES: Final = PriceBook()

_KINDS: Final = {
    RecordKind.TURN: KIND_TURN,
    RecordKind.MODEL: KIND_MODEL,
    RecordKind.TOOL: KIND_TOOL,
}
_NO_COUNTS: Final[tuple[int | None, ...]] = (None, None, None, None, None)


def _model_call(
    rec: SpanRecord, book: PriceBook, missing: dict[str, str]
) -> tuple[str | None, str | None, tuple[int | None, ...], float | None, str | None]:
    """A model call's model, provider, token counts (`TOKEN_FIELDS` order), cost and
    where the cost comes from; why any is missing goes into `missing` (after its
    "duration", if any: the timeline's key order).

    A cost the span carries (a gateway's or provider's own figure) wins over local
    prices, except a zero when local prices do price the call: several instrumentations
    write 0 for a model whose price they do not know."""
    model = model_of(rec.attributes)
    provider: str | None = None
    counts: tuple[int | None, ...] = _NO_COUNTS
    span_cost: float | None = None
    usage = rec.usage
    if usage is not None:
        provider = usage.provider
        span_cost = usage.cost_usd
        counts = (
            usage.input_tokens,
            usage.output_tokens,
            usage.cached_input_tokens,
            usage.reasoning_tokens,
            usage.cache_write_input_tokens,
        )
        if usage.problem is not None:
            for note in usage.problem.split("; "):
                name, _, why = note.partition(": ")
                missing[name] = why
    if span_cost is not None and span_cost > 0:
        return model, provider, counts, span_cost, COST_SPAN
    if "input_tokens" in missing or "output_tokens" in missing:
        if span_cost is not None:
            return model, provider, counts, span_cost, COST_SPAN
        missing["cost_usd"] = "invalid_usage"
        return model, provider, counts, None, None
    priced = book.price(
        model, TokenUsage(*counts[:4]), provider=provider, at_ns=rec.start_ns or None
    )
    cost = priced.cost_usd
    if cost is None:
        if span_cost is not None:
            return model, provider, counts, span_cost, COST_SPAN
        reason = priced.reason or "unknown"
        missing["cost_usd"] = f"{reason}: {model}" if model and reason != MISSING_MODEL else reason
        return model, provider, counts, None, None
    return model, provider, counts, cost, COST_PRICES


def turn_figures(
    root: SpanRecord, members: Sequence[SpanRecord], book: PriceBook
) -> tuple[tuple[TimelineSpan, ...], Usage, Latency, tuple[int, int] | None]:
    """The turn's stored timeline entries, and its usage, latency and wall (first start,
    last end) over all its spans: its own first, the rest in start order (`members`,
    sorted; `root` among them is skipped).

    One pass over the records: every span is folded into the figures (`SpanFold`), and a
    `TimelineSpan` is built only for the spans the turn stores for the timeline: its
    own span, agent steps (nested turns), model and tool calls, and failed spans, at
    most `MAX_TIMELINE_SPANS` in that order. Other spans (framework internals: graph
    nodes, event-loop cycles) count in the figures but are not stored: they were most
    of a stored conversation's bytes."""
    fold = SpanFold((root.span_id,))
    add_span = fold.add_span
    kept: list[TimelineSpan] = []
    first = True
    for rec in chain((root,), members):
        if rec is root:
            if not first:
                continue
            first = False
        kind = _KINDS.get(rec.kind, KIND_OTHER)
        start, end = rec.start_ns, rec.end_ns
        # A span whose times give no duration says why (`span_duration_s`).
        untimed: str | None = None
        if start <= 0 or end < start or end - start > MAX_SPAN_DURATION_NS:
            untimed = timing_problem(start, end) or "unusable start/end times"
        name = rec.tool_name if kind == KIND_TOOL and rec.tool_name else rec.name
        error = rec.error
        if kind == KIND_MODEL:
            missing = {"duration": untimed} if untimed is not None else {}
            model, provider, counts, cost, source = _model_call(rec, book, missing)
            fold.add_model_call(counts, missing, cost, source)
            # A token note could name the duration too (then it is the reason given).
            add_span(kind, rec.span_id, name, start, end, missing.get("duration"))
        else:
            add_span(kind, rec.span_id, name, start, end, untimed)
            if kind == KIND_OTHER and error is None:
                continue  # counted, not stored
            missing = {"duration": untimed} if untimed is not None else {}
            model = provider = cost = source = None
            counts = _NO_COUNTS
        if len(kept) < MAX_TIMELINE_SPANS:
            kept.append(
                construct_unchecked(
                    TimelineSpan,
                    {
                        "span_id": rec.span_id,
                        "parent_span_id": rec.parent_span_id,
                        "kind": kind,
                        "name": name,
                        "start_ns": start,
                        "end_ns": end,
                        "error": error,
                        "model": model,
                        "provider": provider,
                        "input_tokens": counts[0],
                        "output_tokens": counts[1],
                        "cached_input_tokens": counts[2],
                        "reasoning_tokens": counts[3],
                        "cache_write_input_tokens": counts[4],
                        "cost_usd": cost,
                        "cost_source": source,
                        "missing": missing,
                    },
                )
            )
    return tuple(kept), fold.usage(), fold.latency(), fold.wall()
