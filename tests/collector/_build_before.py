"""The conversation build's figures and tool calls as they were before the one-pass
build (the branch point 68c296e, verbatim but for imports and names): the oracle of
`test_build_one_pass.py`, which patches these into `assembly/build.py` and checks that
both builds give equal conversations. Not used by the product.

Copied, not imported from history: the tests must run from a plain checkout. Extended
since, naively, for the figures added after it (issue 34: cache-write input tokens, a
cost the span carries and `cost_source`), so it stays a second implementation of them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from tracepass.collector.assembly.request_arguments import (
    MISSING,
    RAW_KEY,
    Responses,
    _texts,
    _unwrap_response,
    lacks_named_arguments,
    responses_of,
)
from tracepass.collector.normalize import (
    MAX_SPAN_DURATION_NS,
    SOURCE_ATTRIBUTE,
    SOURCE_MODEL_REQUEST,
    SOURCES_ATTR,
    model_of,
    source_of,
    timing_problem,
)
from tracepass.collector.records import RecordKind, SpanRecord, stored_tool_arguments
from tracepass.evaluator.construct import construct_unchecked
from tracepass.evaluator.cost_latency import (
    KIND_MODEL,
    KIND_OTHER,
    KIND_TOOL,
    KIND_TURN,
    TOKEN_FIELDS,
    Latency,
    TimelineSpan,
    Usage,
)
from tracepass.evaluator.models import ToolCall, ToolDefinition
from tracepass.evaluator.pricing import MISSING_MODEL, PriceBook, TokenUsage

MAX_TIMELINE_SPANS = 200
_REQUIRED_ON_EVERY_CALL = frozenset({"input_tokens", "output_tokens"})
_NS = 1e9
_KINDS = {
    RecordKind.TURN: KIND_TURN,
    RecordKind.MODEL: KIND_MODEL,
    RecordKind.TOOL: KIND_TOOL,
}


# ---------------------------------------------------------------- evaluator/cost_latency.py

_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _unchecked(cls: type[Any], values: dict[str, Any]) -> Any:
    """`construct_unchecked` (every field given, values already valid): these figures
    are built once per turn on the evaluation path, from typed records."""
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(cls.model_fields)
    # In field order (the JSON's key order), every field given (a KeyError otherwise).
    return construct_unchecked(cls, {name: values[name] for name in names})


def span_duration_s(span: TimelineSpan) -> float | None:
    """The span's duration, None when its times are unusable (`missing["duration"]`)."""
    start, end = span.start_ns, span.end_ns
    if end < start or start <= 0 or (span.missing and "duration" in span.missing):
        return None
    return (end - start) / _NS


def _count_note(n: int, total: int, what: str) -> str:
    return f"{n} of {total} model calls {what}"


def usage_of(spans: Iterable[TimelineSpan]) -> Usage:
    """Tokens, model calls and cost of the (priced) spans of a turn or conversation."""
    n = 0
    width = len(TOKEN_FIELDS)
    sums = [0] * width
    carried = [0] * width
    bad: list[tuple[int, str] | None] = [None] * width
    n_bad = [0] * width
    cost = 0.0
    sources: set[str] = set()
    unpriced = 0
    unpriced_reason = ""
    for s in spans:
        if s.kind != KIND_MODEL:
            continue
        n += 1
        counts = [getattr(s, name) for name in TOKEN_FIELDS]
        for i in range(width):
            value = counts[i]
            if value is not None:
                sums[i] += value
                carried[i] += 1
        missing_here = s.missing
        if missing_here:
            for i, name in enumerate(TOKEN_FIELDS):
                why = missing_here.get(name)
                if why is not None:
                    n_bad[i] += 1
                    if bad[i] is None:
                        bad[i] = (i, why)
        if s.cost_usd is None:
            unpriced += 1
            if not unpriced_reason:
                unpriced_reason = (missing_here or {}).get("cost_usd", "not priced")
        else:
            cost += s.cost_usd
            sources.add(s.cost_source or "prices")
    values: dict[str, Any] = {"model_calls": n}
    missing: dict[str, str] = {}
    if n == 0:
        for name in TOKEN_FIELDS:
            values[name] = None
        values["cost_usd"] = None
        values["cost_source"] = None
        values["missing"] = {"cost_usd": "no model-call spans"}
        return _unchecked(Usage, values)
    for i, name in enumerate(TOKEN_FIELDS):
        first_bad = bad[i]
        if first_bad is not None:
            values[name] = None
            missing[name] = f"{_count_note(n_bad[i], n, 'unusable')}: {first_bad[1]}"
        elif not carried[i]:
            values[name] = None
        elif carried[i] < n and name in _REQUIRED_ON_EVERY_CALL:
            values[name] = None
            missing[name] = _count_note(n - carried[i], n, "carry no count")
        else:
            values[name] = sums[i]
    if unpriced:
        values["cost_usd"] = None
        values["cost_source"] = None
        missing["cost_usd"] = f"{_count_note(unpriced, n, 'unpriced')}: {unpriced_reason}"
    else:
        values["cost_usd"] = cost
        values["cost_source"] = sources.pop() if len(sources) == 1 else "mixed"
    values["missing"] = missing
    return _unchecked(Usage, values)


def latency_of(spans: Sequence[TimelineSpan], own_span_ids: Iterable[str] = ()) -> Latency:
    """Wall time, time in model calls and tools, and the slowest step of `spans`
    (`own_span_ids`: the turns' own spans, not counted as steps)."""
    own = set(own_span_ids)
    start = end = 0
    model_s = tool_s = 0.0
    slowest: TimelineSpan | None = None
    slowest_s = -1.0
    bad: TimelineSpan | None = None
    n_bad = 0
    timed = 0
    for s in spans:
        d = span_duration_s(s)
        if d is None:
            n_bad += 1
            bad = bad or s
            continue
        if timed == 0 or s.start_ns < start:
            start = s.start_ns
        if timed == 0 or s.end_ns > end:
            end = s.end_ns
        timed += 1
        kind = s.kind
        if kind == KIND_MODEL:
            model_s += d
        elif kind == KIND_TOOL:
            tool_s += d
        if d > slowest_s and s.span_id not in own:
            slowest, slowest_s = s, d
    missing: dict[str, str] = {}
    if bad is not None:
        reason = bad.missing.get("duration", "unusable start/end times")
        missing["duration"] = f"{n_bad} of {len(spans)} spans left out: {reason}"
    if not timed:
        missing = missing or {"duration": "no spans with usable times"}
    return _unchecked(
        Latency,
        {
            "duration_s": (end - start) / _NS if timed else None,
            "model_s": model_s if timed else None,
            "tool_s": tool_s if timed else None,
            "slowest_step": None if slowest is None else f"{slowest.kind}: {slowest.name}",
            "slowest_step_s": None if slowest is None else slowest_s,
            "missing": missing,
        },
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
    sources = {p.cost_source or "prices" for p in with_calls}
    if values["cost_usd"] is None:
        values["cost_source"] = None
    else:
        values["cost_source"] = sources.pop() if len(sources) == 1 else "mixed"
    values["missing"] = missing
    return _unchecked(Usage, values)


def wall_of(spans: Iterable[TimelineSpan]) -> tuple[int, int] | None:
    """(first start, last end) of the spans with usable times; None without any."""
    start = end = 0
    timed = False
    for s in spans:
        if span_duration_s(s) is None:
            continue
        if not timed or s.start_ns < start:
            start = s.start_ns
        if not timed or s.end_ns > end:
            end = s.end_ns
        timed = True
    return (start, end) if timed else None


def combine_latency(parts: Sequence[Latency], walls: Sequence[tuple[int, int] | None]) -> Latency:
    """A conversation's latency from its turns' and their walls (`wall_of` each turn's
    spans): first span start to last span end over every turn."""
    known = [w for w in walls if w is not None]
    if not known:
        return Latency(missing={"duration": "no spans with usable times"})
    start = min(w[0] for w in known)
    end = max(w[1] for w in known)
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
    return _unchecked(
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


# ---------------------------------------------------------------- collector/assembly/timeline.py


def _entry(rec: SpanRecord, book: PriceBook) -> TimelineSpan:
    kind = _KINDS.get(rec.kind, KIND_OTHER)
    missing: dict[str, str] = {}
    start, end = rec.start_ns, rec.end_ns
    if start <= 0 or end < start or end - start > MAX_SPAN_DURATION_NS:
        missing["duration"] = timing_problem(start, end) or "unusable start/end times"
    model: str | None = None
    provider: str | None = None
    counts: list[int | None] = [None] * len(TOKEN_FIELDS)
    cost: float | None = None
    source: str | None = None
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
                usage.cache_write_input_tokens,
            ]
            if usage.problem is not None:
                for note in usage.problem.split("; "):
                    name, _, why = note.partition(": ")
                    missing[name] = why
        span_cost = None if usage is None else usage.cost_usd
        local: float | None = None
        if not any(name in missing for name in ("input_tokens", "output_tokens")):
            local = book.price(
                model, TokenUsage(*counts[:4]), provider=provider, at_ns=rec.start_ns or None
            ).cost_usd
        # The span's own figure wins, but a zero only when local prices have none.
        if span_cost is not None and (span_cost > 0 or local is None):
            cost, source = span_cost, "span"
        elif any(name in missing for name in ("input_tokens", "output_tokens")):
            missing["cost_usd"] = "invalid_usage"
        else:
            priced = book.price(
                model, TokenUsage(*counts[:4]), provider=provider, at_ns=rec.start_ns or None
            )
            cost = priced.cost_usd
            source = None if cost is None else "prices"
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
        "cache_write_input_tokens": counts[4],
        "cost_usd": cost,
        "cost_source": source,
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


# ---------------------------------------------------------------- collector/assembly/request_arguments.py


def tool_calls(
    tools: Sequence[SpanRecord],
    models: Sequence[SpanRecord],
    responses: Responses | None = None,
    agents: Sequence[str | None] | None = None,
) -> tuple[ToolCall, ...]:
    """The turn's tool calls from its tool records (start order), arguments completed from
    the model requests where the span had none, results from `responses` (by call id)
    where it had none (default: what the model records carry); `agents`, aligned with
    `tools`, names the agent of each call (assembly/steps.py)."""
    requested: list[tuple[int, ToolCall]] = []  # (model start, request) in model order
    for model in models:
        requested.extend((model.start_ns, call) for call in model.requested_tool_calls)
    matches: dict[int, int] = {}
    # Read once per tool: a record may hold its arguments as text decoded on each read
    # (records.py); a decoded text is a new dict, a stored dict is copied below.
    fresh = [stored_tool_arguments(rec).__class__ is str for rec in tools]
    tool_args = [rec.tool_arguments for rec in tools]
    # No model request in the turn (the usual GenAI shape): nothing to match.
    if requested:
        used = [False] * len(requested)
        by_id = {call.call_id: i for i, (_, call) in enumerate(requested) if call.call_id}
        # Ids first, for every tool, so an id-matched request is not taken by name earlier.
        for t, rec in enumerate(tools):
            i = by_id.get(rec.tool_call_id) if rec.tool_call_id else None
            if i is not None and not used[i]:
                used[i] = True
                matches[t] = i
        for t, rec in enumerate(tools):
            if t in matches or not lacks_named_arguments(tool_args[t]):
                continue
            name = rec.tool_name or rec.name
            candidates = [
                i
                for i, (start, call) in enumerate(requested)
                if not used[i] and call.name == name and start <= rec.start_ns
            ]
            if not candidates:
                continue
            # Parallel calls of one tool: the request whose value is the span's bare text.
            raw = (tool_args[t] or {}).get(RAW_KEY)
            chosen = next(
                (i for i in candidates if raw is not None and raw in _texts(requested[i][1])),
                candidates[0],
            )
            used[chosen] = True
            matches[t] = chosen
    if responses is None:
        responses = responses_of(models)
    named = agents if agents is not None else [None] * len(tools)
    out: list[ToolCall] = []
    for t, rec in enumerate(tools):
        args = tool_args[t]
        arguments = {} if args is None else args if fresh[t] else dict(args)
        # `source_of`, inlined for the usual record that noted no source at all.
        source = (
            SOURCE_ATTRIBUTE
            if SOURCES_ATTR not in rec.attributes
            else source_of(rec, "tool_arguments")
        )
        call_id = rec.tool_call_id
        i = matches.get(t) if matches else None
        if i is not None:
            request = requested[i][1]
            if lacks_named_arguments(arguments) and request.arguments:
                arguments = dict(request.arguments)
                source = SOURCE_MODEL_REQUEST
            call_id = call_id or request.call_id
        result, error = rec.tool_result, rec.error
        found = (
            MISSING if result is not None or call_id is None else responses.get(call_id, arguments)
        )
        if found is not MISSING:
            result, error = _unwrap_response(found, error)
        # Unchecked (every field given, each already of its field's type: typed record
        # fields, or a validated request's): validating ~15 calls per conversation was
        # a third of rebuilding it (tests/collector/test_build_unchecked.py).
        out.append(
            construct_unchecked(
                ToolCall,
                {
                    "name": rec.tool_name or rec.name,
                    "arguments": arguments,
                    "result": result,
                    "error": error,
                    "call_id": call_id,
                    "start_ns": rec.start_ns,
                    "arguments_source": source,
                    "agent": named[t],
                },
            )
        )
    return tuple(out)


# ---------------------------------------------------------------- collector/assembly/build.py


def _offered_tools(root: SpanRecord, models: list[SpanRecord]) -> tuple[ToolDefinition, ...] | None:
    """Every tool offered in the turn: declared on its agent span or to its model calls
    (first definition of a name wins); None when no span said."""
    found: dict[str, ToolDefinition] = {}
    known = False
    # A TOOL record's definitions are its own schema, not an offer (see _tool_schemas).
    declaring = (root, *models) if root.kind is not RecordKind.TOOL else models
    for m in declaring:
        if m.tool_definitions is None:
            continue
        known = True
        for d in m.tool_definitions:
            found.setdefault(d.name, d)
    return tuple(found.values()) if known else None


def _tool_schemas(tools: list[SpanRecord]) -> dict[str, dict[str, object]]:
    return {
        d.name: d.parameters
        for r in tools
        for d in r.tool_definitions or ()
        if d.parameters is not None
    }
