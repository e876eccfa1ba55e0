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
* Cost is the sum of every model call's cost; None when any call has none (unknown
  model, missing or invalid counts), with the reason. A call's cost is the figure its
  span carries (a gateway's or provider's, `cost_source: "span"`) when it has one, else
  its price from local prices (`pricing.PriceBook`, `cost_source: "prices"`); a
  turn's or conversation's `cost_source` is "span", "prices" or "mixed".
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
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from tracepass.evaluator.construct import construct_unchecked
from tracepass.evaluator.pricing import PriceBook, TokenUsage

__all__ = [
    "COST_MIXED",
    "COST_PRICES",
    "COST_SPAN",
    "KIND_MODEL",
    "KIND_TOOL",
    "KIND_TURN",
    "TOKEN_FIELDS",
    "Latency",
    "SpanFold",
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
    "wall_of",
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
    "cache_write_input_tokens",
)
COST_SPAN: Final = "span"
COST_PRICES: Final = "prices"
COST_MIXED: Final = "mixed"
# Counts whose absence on some calls makes the total unknown (see the module doc).
_REQUIRED_ON_EVERY_CALL: Final = frozenset({"input_tokens", "output_tokens"})
_N_COUNTS: Final = len(TOKEN_FIELDS)
_NS: Final = 1e9
_M = TypeVar("_M", bound=BaseModel)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


_FIELD_NAMES: dict[type[BaseModel], tuple[str, ...]] = {}


def _unchecked(cls: type[_M], values: dict[str, Any]) -> _M:
    """`construct_unchecked` (every field given, values already valid): these figures
    are built once per turn on the evaluation path, from typed records."""
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(cls.model_fields)
    # In field order (the JSON's key order), every field given (a KeyError otherwise).
    return construct_unchecked(cls, {name: values[name] for name in names})


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
    cache_write_input_tokens: int | None = None
    cost_usd: float | None = None
    # Where `cost_usd` comes from: "span" (the span's own figure) or "prices".
    cost_source: str | None = None
    # {field: why it is None}: a token count, "duration", "cost_usd".
    missing: dict[str, str] = Field(default_factory=dict)


class Usage(_Frozen):
    """`usage` of a turn or conversation in the API (see the module doc for the rules)."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_input_tokens: int | None = None
    reasoning_tokens: int | None = None
    cache_write_input_tokens: int | None = None
    model_calls: int = 0
    cost_usd: float | None = None
    # "span", "prices" or "mixed" (see the module doc); None when `cost_usd` is.
    cost_source: str | None = None
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
    start, end = span.start_ns, span.end_ns
    if end < start or start <= 0 or (span.missing and "duration" in span.missing):
        return None
    return (end - start) / _NS


def _token_usage(span: TimelineSpan) -> TokenUsage:
    return TokenUsage(
        input_tokens=span.input_tokens,
        output_tokens=span.output_tokens,
        cached_input_tokens=span.cached_input_tokens,
        reasoning_tokens=span.reasoning_tokens,
    )


def price_spans(spans: Sequence[TimelineSpan], book: PriceBook) -> tuple[TimelineSpan, ...]:
    """`spans` with each model call's `cost_usd` (or `missing["cost_usd"]`) filled in
    from `book`; a cost the span itself carried (`cost_source: "span"`) is kept."""
    out: list[TimelineSpan] = []
    for span in spans:
        if span.kind != KIND_MODEL or span.cost_source == COST_SPAN:
            out.append(span)
            continue
        priced = book.price(
            span.model, _token_usage(span), provider=span.provider, at_ns=span.start_ns
        )
        if priced.cost_usd is not None:
            out.append(
                span.model_copy(update={"cost_usd": priced.cost_usd, "cost_source": COST_PRICES})
            )
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


class SpanFold:
    """A turn's usage, latency and wall folded span by span, in one pass and without a
    model per span: the one place the per-span rules of the module doc are spelled.

    Why a fold: assembly builds these figures from its records once per evaluated
    conversation (`assembly/timeline.py`), and a `TimelineSpan` per span, then a pass
    each for usage, latency and wall, was a fifth of the evaluation path. `usage_of`,
    `latency_of` and `wall_of` feed their `TimelineSpan`s through the same fold.

    `add_span` takes every span (in the turn's order: its own first, the rest by start),
    `add_model_call` each model call's counts, its `missing` reasons and its price.
    `own_span_ids`: the turns' own spans, never the slowest step."""

    __slots__ = (
        "_bad",
        "_carried",
        "_cost",
        "_cost_sources",
        "_end",
        "_model_s",
        "_n_bad",
        "_own",
        "_slowest_kind",
        "_slowest_name",
        "_slowest_s",
        "_spans",
        "_start",
        "_sums",
        "_timed",
        "_tool_s",
        "_unpriced",
        "_unpriced_reason",
        "_untimed",
        "_untimed_reason",
        "calls",
    )

    # The model-call tallies are set by the first `add_model_call` (most turns of most
    # agents' spans have some, the e2e benchmark's none): `usage` reads them only then.
    _sums: list[int]
    _carried: list[int]
    _bad: list[str | None]
    _n_bad: list[int]
    _cost: float
    _cost_sources: set[str]
    _unpriced: int
    _unpriced_reason: str

    def __init__(self, own_span_ids: Iterable[str] = ()) -> None:
        self._own = (
            own_span_ids if isinstance(own_span_ids, (set, frozenset, tuple)) else set(own_span_ids)
        )
        self.calls = 0
        self._spans = 0
        self._timed = 0
        self._start = self._end = 0
        self._model_s = self._tool_s = 0.0
        self._slowest_kind = self._slowest_name = ""
        self._slowest_s = -1.0
        self._untimed = 0
        self._untimed_reason = ""

    def add_model_call(
        self,
        counts: Sequence[int | None],
        missing: Mapping[str, str],
        cost_usd: float | None,
        cost_source: str | None = COST_PRICES,
    ) -> None:
        """One model call: its token counts (`TOKEN_FIELDS` order; a shorter sequence
        leaves the last ones unset), why any is unusable or the call unpriced
        (`missing`), its cost (None: unpriced) and where that comes from."""
        if self.calls == 0:
            self._sums = [0] * _N_COUNTS
            self._carried = [0] * _N_COUNTS
            self._bad = [None] * _N_COUNTS
            self._n_bad = [0] * _N_COUNTS
            self._cost = 0.0
            self._cost_sources = set()
            self._unpriced = 0
            self._unpriced_reason = ""
        self.calls += 1
        sums, carried = self._sums, self._carried
        for i in range(min(len(counts), _N_COUNTS)):
            value = counts[i]
            if value is not None:
                sums[i] += value
                carried[i] += 1
        if missing:
            bad, n_bad = self._bad, self._n_bad
            for i, name in enumerate(TOKEN_FIELDS):
                why = missing.get(name)
                if why is not None:
                    n_bad[i] += 1
                    if bad[i] is None:
                        bad[i] = why
        if cost_usd is None:
            self._unpriced += 1
            if not self._unpriced_reason:
                self._unpriced_reason = missing.get("cost_usd", "not priced")
        else:
            self._cost += cost_usd
            self._cost_sources.add(cost_source or COST_PRICES)

    def add_span(
        self,
        kind: str,
        span_id: str,
        name: str,
        start_ns: int,
        end_ns: int,
        untimed: str | None = None,
    ) -> None:
        """One span of any kind; `untimed`: why its times give no duration (None: they
        do; the caller decides, see `span_duration_s`)."""
        self._spans += 1
        if untimed is not None:
            self._untimed += 1
            if self._untimed == 1:
                self._untimed_reason = untimed
            return
        d = (end_ns - start_ns) / _NS
        if self._timed == 0:
            self._start, self._end = start_ns, end_ns
        else:
            if start_ns < self._start:
                self._start = start_ns
            if end_ns > self._end:
                self._end = end_ns
        self._timed += 1
        if kind == KIND_MODEL:
            self._model_s += d
        elif kind == KIND_TOOL:
            self._tool_s += d
        if d > self._slowest_s and span_id not in self._own:
            self._slowest_kind, self._slowest_name, self._slowest_s = kind, name, d

    def usage(self) -> Usage:
        """Tokens, model calls and cost of the model calls added."""
        n = self.calls
        if n == 0:
            return _no_model_calls()
        values: dict[str, Any] = {}
        missing: dict[str, str] = {}
        sums, carried, bad = self._sums, self._carried, self._bad
        for i, name in enumerate(TOKEN_FIELDS):
            first_bad = bad[i]
            if first_bad is not None:
                values[name] = None
                missing[name] = f"{_count_note(self._n_bad[i], n, 'unusable')}: {first_bad}"
            elif not carried[i]:
                values[name] = None
            elif carried[i] < n and name in _REQUIRED_ON_EVERY_CALL:
                values[name] = None
                missing[name] = _count_note(n - carried[i], n, "carry no count")
            else:
                values[name] = sums[i]
        values["model_calls"] = n
        if self._unpriced:
            values["cost_usd"] = None
            values["cost_source"] = None
            missing["cost_usd"] = (
                f"{_count_note(self._unpriced, n, 'unpriced')}: {self._unpriced_reason}"
            )
        else:
            values["cost_usd"] = self._cost
            values["cost_source"] = _source_of(self._cost_sources)
        values["missing"] = missing
        return construct_unchecked(Usage, values)

    def latency(self) -> Latency:
        """Wall time, model and tool time and the slowest step of the spans added."""
        timed = self._timed
        missing: dict[str, str] = {}
        if self._untimed:
            missing["duration"] = (
                f"{self._untimed} of {self._spans} spans left out: {self._untimed_reason}"
            )
        if not timed:
            return construct_unchecked(
                Latency,
                {
                    "duration_s": None,
                    "model_s": None,
                    "tool_s": None,
                    "slowest_step": None,
                    "slowest_step_s": None,
                    "missing": missing or {"duration": "no spans with usable times"},
                },
            )
        found = self._slowest_s >= 0.0
        return construct_unchecked(
            Latency,
            {
                "duration_s": (self._end - self._start) / _NS,
                "model_s": self._model_s,
                "tool_s": self._tool_s,
                "slowest_step": f"{self._slowest_kind}: {self._slowest_name}" if found else None,
                "slowest_step_s": self._slowest_s if found else None,
                "missing": missing,
            },
        )

    def wall(self) -> tuple[int, int] | None:
        """(first start, last end) of the spans with usable times; None without any."""
        return (self._start, self._end) if self._timed else None


def _source_of(sources: set[str]) -> str:
    """One figure's `cost_source` from its parts' ("mixed" when they differ)."""
    if len(sources) == 1:
        return next(iter(sources))
    return COST_MIXED


def _no_model_calls() -> Usage:
    """The usage of a turn or conversation without model calls (a fresh `missing` dict
    each: the models are frozen, their dicts are not)."""
    return construct_unchecked(
        Usage,
        {
            "input_tokens": None,
            "output_tokens": None,
            "cached_input_tokens": None,
            "reasoning_tokens": None,
            "cache_write_input_tokens": None,
            "model_calls": 0,
            "cost_usd": None,
            "cost_source": None,
            "missing": {"cost_usd": "no model-call spans"},
        },
    )


def usage_of(spans: Iterable[TimelineSpan]) -> Usage:
    """Tokens, model calls and cost of the (priced) spans of a turn or conversation."""
    fold = SpanFold()
    for s in spans:
        if s.kind == KIND_MODEL:
            fold.add_model_call(
                (
                    s.input_tokens,
                    s.output_tokens,
                    s.cached_input_tokens,
                    s.reasoning_tokens,
                    s.cache_write_input_tokens,
                ),
                s.missing,
                s.cost_usd,
                s.cost_source,
            )
    return fold.usage()


def _untimed(span: TimelineSpan) -> str | None:
    """Why `span` has no duration (`span_duration_s` is None), else None."""
    if span_duration_s(span) is not None:
        return None
    return span.missing.get("duration", "unusable start/end times")


def latency_of(spans: Sequence[TimelineSpan], own_span_ids: Iterable[str] = ()) -> Latency:
    """Wall time, time in model calls and tools, and the slowest step of `spans`
    (`own_span_ids`: the turns' own spans, not counted as steps)."""
    fold = SpanFold(own_span_ids)
    for s in spans:
        fold.add_span(s.kind, s.span_id, s.name, s.start_ns, s.end_ns, _untimed(s))
    return fold.latency()


def combine_usage(parts: Sequence[Usage]) -> Usage:
    """A conversation's usage from its turns' (the same rules as over all its spans:
    a count is None when a turn's is unusable or partial; cost None when any is)."""
    calls = 0
    for p in parts:
        calls += p.model_calls
    if calls == 0:
        return _no_model_calls()
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
    sources = {p.cost_source or COST_PRICES for p in with_calls}
    values["cost_source"] = None if values["cost_usd"] is None else _source_of(sources)
    values["missing"] = missing
    return _unchecked(Usage, values)


def wall_of(spans: Iterable[TimelineSpan]) -> tuple[int, int] | None:
    """(first start, last end) of the spans with usable times; None without any."""
    fold = SpanFold()
    for s in spans:
        fold.add_span(s.kind, s.span_id, s.name, s.start_ns, s.end_ns, _untimed(s))
    return fold.wall()


def combine_latency(parts: Sequence[Latency], walls: Sequence[tuple[int, int] | None]) -> Latency:
    """A conversation's latency from its turns' and their walls (`wall_of` each turn's
    spans): first span start to last span end over every turn."""
    start = end = 0
    known = False
    for wall in walls:  # loops, not min()/max() over generators: once per conversation
        if wall is None:
            continue
        if not known:
            (start, end), known = wall, True
            continue
        if wall[0] < start:
            start = wall[0]
        if wall[1] > end:
            end = wall[1]
    if not known:
        return Latency(missing={"duration": "no spans with usable times"})
    missing: dict[str, str] = {}
    model_s = tool_s = 0.0
    slowest: Latency | None = None
    for p in parts:
        for name, why in p.missing.items():
            missing.setdefault(name, why)
        model_s += p.model_s or 0.0
        tool_s += p.tool_s or 0.0
        if p.slowest_step_s is not None and (
            slowest is None or p.slowest_step_s > (slowest.slowest_step_s or 0.0)
        ):
            slowest = p
    return construct_unchecked(
        Latency,
        {
            "duration_s": (end - start) / _NS,
            "model_s": model_s,
            "tool_s": tool_s,
            "slowest_step": None if slowest is None else slowest.slowest_step,
            "slowest_step_s": None if slowest is None else slowest.slowest_step_s,
            "missing": missing,
        },
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
