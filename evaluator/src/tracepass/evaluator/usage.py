"""Tokens, cost and latency of a turn and a conversation, from the spans it is made of.

The collector (and `tracepass evaluate` through it) records each span of a turn as a
`TimelineSpan`: kind, name, start/end, error, and for model calls the model, provider
and token counts. This module turns those into the `usage` and latency figures the API,
the metrics and the reports show, with the rules spelled once:

* Tokens by type are summed over the turn's model calls (MODEL spans only: agent spans
  that repeat their calls' sums are not model calls). A count no model call carries is
  None, not 0. Input and output tokens are None when some calls carry them and others
  do not (a partial sum would be a guess); cached and reasoning tokens are summed over
  the calls that report them (providers omit a zero detail).
* Cost is the sum of every model call's price (`pricing.PriceBook`); None when any
  call cannot be priced (unknown model, missing or invalid counts), with the reason.
* Wall latency is first span start to last span end; model and tool time are the sums
  of their spans' durations (parallel tool calls can make tool time exceed the wall
  time); the slowest step is the longest span other than the turn's own.
* A span whose times are unusable (end before start, unset, longer than a year) has no
  duration and is left out of every time figure, with the reason.

Whatever is missing is None in the figure and explained in its `missing` map
(`{field: reason}`), never replaced by a guessed number.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field

from tracepass.evaluator.pricing import PriceBook, TokenUsage

__all__ = [
    "KIND_MODEL",
    "KIND_TOOL",
    "KIND_TURN",
    "TOKEN_FIELDS",
    "Latency",
    "TimelineSpan",
    "Usage",
    "VersionFigures",
    "combine_latency",
    "combine_usage",
    "latency_of",
    "nearest_rank",
    "price_spans",
    "span_duration_s",
    "usage_of",
    "version_figures",
]

KIND_TURN: Final = "turn"
KIND_MODEL: Final = "model"
KIND_TOOL: Final = "tool"
KIND_OTHER: Final = "other"

TOKEN_FIELDS: Final = (
    "input_tokens",
    "output_tokens",
    "cached_input_tokens",
    "reasoning_tokens",
)
# Counts whose absence on some calls makes the total unknown (see the module doc).
_REQUIRED_ON_EVERY_CALL: Final = frozenset({"input_tokens", "output_tokens"})
_NS: Final = 1e9


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TimelineSpan(_Frozen):
    """One span of a turn as the timeline shows it (and the figures are computed from)."""

    span_id: str
    parent_span_id: str | None = None
    kind: str = KIND_OTHER  # turn | model | tool | other
    name: str = ""
    start_ns: int = 0
    end_ns: int = 0
    error: str | None = None
    model: str | None = None
    provider: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_input_tokens: int | None = None
    reasoning_tokens: int | None = None
    cost_usd: float | None = None
    # {field: why it is None}: a token count, "duration", "cost_usd".
    missing: dict[str, str] = Field(default_factory=dict)


class Usage(_Frozen):
    """`usage` of a turn or conversation in the API (see the module doc for the rules)."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_input_tokens: int | None = None
    reasoning_tokens: int | None = None
    model_calls: int = 0
    cost_usd: float | None = None
    missing: dict[str, str] = Field(default_factory=dict)


class Latency(_Frozen):
    """Where a turn's or conversation's time went (seconds; None: not known)."""

    duration_s: float | None = None
    model_s: float | None = None
    tool_s: float | None = None
    slowest_step: str | None = None
    slowest_step_s: float | None = None
    missing: dict[str, str] = Field(default_factory=dict)


def span_duration_s(span: TimelineSpan) -> float | None:
    """The span's duration, None when its times are unusable (`missing["duration"]`)."""
    if "duration" in span.missing or span.end_ns < span.start_ns or span.start_ns <= 0:
        return None
    return (span.end_ns - span.start_ns) / _NS


def _token_usage(span: TimelineSpan) -> TokenUsage:
    return TokenUsage(
        input_tokens=span.input_tokens,
        output_tokens=span.output_tokens,
        cached_input_tokens=span.cached_input_tokens,
        reasoning_tokens=span.reasoning_tokens,
    )


def price_spans(spans: Sequence[TimelineSpan], book: PriceBook) -> tuple[TimelineSpan, ...]:
    """`spans` with each model call's `cost_usd` (or `missing["cost_usd"]`) filled in."""
    out: list[TimelineSpan] = []
    for span in spans:
        if span.kind != KIND_MODEL:
            out.append(span)
            continue
        priced = book.price(
            span.model, _token_usage(span), provider=span.provider, at_ns=span.start_ns
        )
        if priced.cost_usd is not None:
            out.append(span.model_copy(update={"cost_usd": priced.cost_usd}))
        else:
            reason = priced.reason or "unknown"
            if span.model and reason != "missing_model":
                reason = f"{reason}: {span.model}"
            out.append(
                span.model_copy(
                    update={"cost_usd": None, "missing": {**span.missing, "cost_usd": reason}}
                )
            )
    return tuple(out)


def _count_note(n: int, total: int, what: str) -> str:
    return f"{n} of {total} model calls {what}"


def usage_of(spans: Iterable[TimelineSpan]) -> Usage:
    """Tokens, model calls and cost of the (priced) spans of a turn or conversation."""
    calls = [s for s in spans if s.kind == KIND_MODEL]
    n = len(calls)
    values: dict[str, Any] = {"model_calls": n}
    missing: dict[str, str] = {}
    if n == 0:
        for name in TOKEN_FIELDS:
            values[name] = None
        return Usage(**values, cost_usd=None, missing={"cost_usd": "no model-call spans"})
    for name in TOKEN_FIELDS:
        carried = [getattr(s, name) for s in calls if getattr(s, name) is not None]
        bad = [s.missing[name] for s in calls if name in s.missing]
        if bad:
            values[name] = None
            missing[name] = f"{_count_note(len(bad), n, 'unusable')}: {bad[0]}"
        elif not carried:
            values[name] = None
        elif len(carried) < n and name in _REQUIRED_ON_EVERY_CALL:
            values[name] = None
            missing[name] = _count_note(n - len(carried), n, "carry no count")
        else:
            values[name] = sum(carried)
    costs = [s.cost_usd for s in calls]
    unpriced = [s.missing.get("cost_usd", "not priced") for s in calls if s.cost_usd is None]
    if unpriced:
        values["cost_usd"] = None
        missing["cost_usd"] = f"{_count_note(len(unpriced), n, 'unpriced')}: {unpriced[0]}"
    else:
        values["cost_usd"] = float(sum(c for c in costs if c is not None))
    return Usage(**values, missing=missing)


def latency_of(spans: Sequence[TimelineSpan], own_span_ids: Iterable[str] = ()) -> Latency:
    """Wall time, time in model calls and tools, and the slowest step of `spans`
    (`own_span_ids`: the turns' own spans, not counted as steps)."""
    own = set(own_span_ids)
    timed = [(s, d) for s in spans if (d := span_duration_s(s)) is not None]
    missing: dict[str, str] = {}
    bad = [s for s in spans if span_duration_s(s) is None]
    if bad:
        reason = bad[0].missing.get("duration", "unusable start/end times")
        missing["duration"] = f"{len(bad)} of {len(spans)} spans left out: {reason}"
    if not timed:
        return Latency(missing=missing or {"duration": "no spans with usable times"})
    start = min(s.start_ns for s, _ in timed)
    end = max(s.end_ns for s, _ in timed)
    model_s = sum(d for s, d in timed if s.kind == KIND_MODEL)
    tool_s = sum(d for s, d in timed if s.kind == KIND_TOOL)
    steps = [(s, d) for s, d in timed if s.span_id not in own]
    slowest = max(steps, key=lambda sd: sd[1]) if steps else None
    return Latency(
        duration_s=(end - start) / _NS,
        model_s=model_s,
        tool_s=tool_s,
        slowest_step=None if slowest is None else f"{slowest[0].kind}: {slowest[0].name}",
        slowest_step_s=None if slowest is None else slowest[1],
        missing=missing,
    )


def combine_usage(parts: Sequence[Usage]) -> Usage:
    """A conversation's usage from its turns' (the same rules as over all its spans:
    a count is None when a turn's is unusable or partial; cost None when any is)."""
    calls = sum(p.model_calls for p in parts)
    if calls == 0:
        return usage_of(())
    values: dict[str, Any] = {"model_calls": calls}
    missing: dict[str, str] = {}
    with_calls = [p for p in parts if p.model_calls]
    for name in (*TOKEN_FIELDS, "cost_usd"):
        broken = [p.missing[name] for p in with_calls if name in p.missing]
        carried = [getattr(p, name) for p in with_calls if getattr(p, name) is not None]
        if broken:
            values[name] = None
            missing[name] = broken[0]
        elif not carried:
            values[name] = None
        elif len(carried) < len(with_calls) and name in _REQUIRED_ON_EVERY_CALL:
            values[name] = None
            missing[name] = f"{len(with_calls) - len(carried)} turns' model calls carry no count"
        else:
            values[name] = sum(carried) if name != "cost_usd" else float(sum(carried))
    return Usage(**values, missing=missing)


def combine_latency(parts: Sequence[Latency], spans: Sequence[TimelineSpan]) -> Latency:
    """A conversation's latency from its turns' and their stored spans (for the wall
    time: first span start to last span end over every turn)."""
    timed = [s for s in spans if span_duration_s(s) is not None]
    if not timed:
        return Latency(missing={"duration": "no spans with usable times"})
    missing: dict[str, str] = {}
    for p in parts:
        for name, why in p.missing.items():
            missing.setdefault(name, why)
    slowest = max(
        (p for p in parts if p.slowest_step_s is not None),
        key=lambda p: p.slowest_step_s or 0.0,
        default=None,
    )
    return Latency(
        duration_s=(max(s.end_ns for s in timed) - min(s.start_ns for s in timed)) / _NS,
        model_s=sum(p.model_s or 0.0 for p in parts),
        tool_s=sum(p.tool_s or 0.0 for p in parts),
        slowest_step=None if slowest is None else slowest.slowest_step,
        slowest_step_s=None if slowest is None else slowest.slowest_step_s,
        missing=missing,
    )


def nearest_rank(values: Sequence[float], q: float) -> float | None:
    """The q-quantile (0 < q <= 1) by nearest rank: the smallest value with at least
    q of the values at or below it (an observed value, never interpolated); None when
    there are none."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


class VersionFigures(_Frozen):
    """Cost and latency of one agent version's conversations (API, compare, reports)."""

    conversations: int
    # Conversations whose cost is known; `mean`/`p95`/`total` are over those only.
    priced: int
    cost_usd_mean: float | None = None
    cost_usd_p95: float | None = None
    cost_usd_total: float | None = None
    duration_s_p50: float | None = None
    duration_s_p95: float | None = None


def version_figures(
    costs: Sequence[float | None], durations: Sequence[float | None]
) -> VersionFigures:
    """Figures over the conversations' costs and durations (None: unknown, left out)."""
    known_costs = [c for c in costs if c is not None]
    known_durations = [d for d in durations if d is not None]
    total = float(sum(known_costs)) if known_costs else None
    return VersionFigures(
        conversations=max(len(costs), len(durations)),
        priced=len(known_costs),
        cost_usd_mean=None if total is None else total / len(known_costs),
        cost_usd_p95=nearest_rank(known_costs, 0.95),
        cost_usd_total=total,
        duration_s_p50=nearest_rank(known_durations, 0.5),
        duration_s_p95=nearest_rank(known_durations, 0.95),
    )
