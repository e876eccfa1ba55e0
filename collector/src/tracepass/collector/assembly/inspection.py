"""What `tracepass inspect` reports: how each span of each turn was read, and what looks
misread.

A user onboarding a new framework needs to see, in one place, whether tracepass reads
its spans right: per conversation and turn, which convention claimed each span and
which framework adapter corrected it, which fields were found and where from (span
attribute, span event, log record, adapter, the model's request), and warnings for the
shapes that usually mean a misread. It runs the same stages as `tracepass
conversations` (normalization, then assembly) and reads the provenance the records
carry; the raw requests are consulted only for spans no convention claimed, to tell a
harmless span (an HTTP server span) from one that carries content nobody read.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracepass.collector.normalize import (
    ADAPTERS,
    ADAPTERS_ATTR,
    CONVENTION_ATTR,
    ROLE_ATTR,
    RUN_IDS_ATTR,
    SOURCES_ATTR,
    CustomConventions,
    OtlpRequest,
    normalize_any,
    source_of,
)
from tracepass.collector.records import RecordKind, Rejection, SpanRecord
from tracepass.evaluator.models import Conversation, ToolCall, Turn

from .assembler import complete_all
from .build import build_conversation, top_level_turn
from .event_join import join_log_events
from .span_shapes import SpanShapes

# Where a user is sent when tracepass reads too little (docs/conventions.md).
MAPPING_POINTER = (
    "write a mapping for these spans: `tracepass inspect --suggest-mapping FILE` prints a "
    "starting one for `conventions.custom` (docs/conventions.md, 'My framework is not listed')"
)

SpanKey = tuple[str, str]

# Record fields reported as "found" when set, in report order.
FIELDS = (
    "input_text",
    "output_text",
    "tool_name",
    "tool_call_id",
    "tool_arguments",
    "tool_result",
    "error",
    "requested_tool_calls",
)
# Attribute keys that carry agent content: an unclaimed span with one of them was
# probably misread (or its convention is not supported yet).
_CONTENT_KEYS = (
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.tool.",
    "gen_ai.prompt",
    "gen_ai.completion",
    "llm.input_messages",
    "llm.output_messages",
    "input.value",
    "output.value",
    "traceloop.entity.input",
)
# Argument shapes that are a wrapper around the real arguments, not the arguments.
_WRAPPER_KEYS = (
    frozenset({"args", "kwargs"}),
    frozenset({"args", "kwargs", "sanitize_inputs_outputs"}),
    frozenset({"kwargs"}),
    frozenset({"input_str"}),
    frozenset({"inputs"}),
)
# `ClassName(field=…` or `<module.Class object at 0x…>`: the repr of an object.
_REPR = re.compile(r"^[A-Z][A-Za-z0-9_]*\([a-z_]+=|<[\w.]+ object at 0x[0-9a-f]+>")


@dataclass(slots=True)
class SpanReport:
    span_id: str
    name: str
    kind: str
    convention: str | None
    adapters: list[str]
    fields: dict[str, str]  # field -> where it came from
    role: str | None = None


@dataclass(slots=True)
class ToolCallReport:
    name: str
    arguments: dict[str, Any]
    arguments_source: str | None
    has_result: bool
    error: str | None


@dataclass(slots=True)
class TurnReport:
    index: int
    trace_id: str | None
    query: str | None
    answer: str | None
    tool_calls: list[ToolCallReport]
    spans: list[SpanReport]
    warnings: list[str] = field(default_factory=list)


@dataclass(slots=True)
class ConversationReport:
    id: str
    turns: list[TurnReport]
    warnings: list[str] = field(default_factory=list)
    # The reference the agent named (`conversation(reference_id=…)`), if any.
    reference_id: str | None = None


@dataclass(slots=True)
class InspectionReport:
    conversations: list[ConversationReport]
    spans_by_convention: dict[str, int]
    spans_by_adapter: dict[str, int]
    rejected: list[str]
    # Whole-input warnings: nothing read, no tool call read, spans that each start their
    # own trace (`_input_warnings`).
    warnings: list[str] = field(default_factory=list)
    # The span names, scopes and attribute keys seen, most frequent first (`span_shapes`).
    seen: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def warning_count(self) -> int:
        return len(self.warnings) + sum(
            len(c.warnings) + sum(len(t.warnings) for t in c.turns) for c in self.conversations
        )


def inspect_requests(
    requests: Iterable[OtlpRequest],
    *,
    conversation_id_keys: Sequence[str] = (),
    custom: CustomConventions | None = None,
    shapes: SpanShapes | None = None,
) -> InspectionReport:
    """Normalize and assemble `requests` as `tracepass conversations` does (with the
    user's `custom` mappings, when given), and report how every span was read; `shapes`,
    when given, is filled with the span shapes seen (for `--suggest-mapping`)."""
    records: list[SpanRecord] = []
    rejections: list[Rejection] = []
    content_keys: dict[SpanKey, list[str]] = {}
    keys = tuple(conversation_id_keys)
    seen = shapes if shapes is not None else SpanShapes()
    for request in requests:
        recs, rejected = normalize_any(request, conversation_id_keys=keys, custom=custom)
        records.extend(recs)
        rejections.extend(rejected)
        if isinstance(request, ExportTraceServiceRequest):
            content_keys.update(_unclaimed_content(request, recs))
            seen.add(request)
    by_convention = Counter(
        str(r.attributes.get(CONVENTION_ATTR) or "(none)")
        for r in records
        if r.kind is not RecordKind.EVENT
    )
    by_adapter = Counter(a for r in records for a in r.attributes.get(ADAPTERS_ATTR) or ())
    conversations = [_conversation(key, group, content_keys) for key, group in _assembled(records)]
    conversations = [c for c in conversations if c.turns]
    conversations.sort(key=lambda c: c.id)
    return InspectionReport(
        conversations=conversations,
        spans_by_convention=dict(sorted(by_convention.items())),
        spans_by_adapter=dict(sorted(by_adapter.items())),
        rejected=[r.message for r in rejections],
        warnings=_input_warnings(records, conversations, seen),
        seen=seen.top(),
    )


def _seen_listing(seen: SpanShapes) -> str:
    top = seen.top()
    parts = [
        f"{label}: " + (", ".join(f"{k} ({n})" for k, n in top[table].items()) or "(none)")
        for label, table in (
            ("span names", "span_names"),
            ("scopes", "scopes"),
            ("attribute keys", "attribute_keys"),
        )
    ]
    return "; ".join(parts)


def _input_warnings(
    records: Sequence[SpanRecord], conversations: Sequence[ConversationReport], seen: SpanShapes
) -> list[str]:
    """What the whole input says: nothing (or no tool call) read from its spans, with
    the shapes seen and the pointer to a mapping; spans that each start their own trace."""
    warnings: list[str] = []
    spans = sum(1 for r in records if r.kind is not RecordKind.EVENT)
    turns = sum(len(c.turns) for c in conversations)
    calls = sum(len(t.tool_calls) for c in conversations for t in c.turns)
    if spans and not turns:
        warnings.append(
            f"nothing read: no conversation, turn or tool call from {spans} span(s) "
            f"({_seen_listing(seen)}); {MAPPING_POINTER}"
        )
    elif spans and not calls:
        warnings.append(
            f"no tool call read from {spans} span(s) in {turns} turn(s) "
            f"({_seen_listing(seen)}); if the agent called tools, {MAPPING_POINTER}"
        )
    per_trace = Counter(r.trace_id for r in records if r.kind is not RecordKind.EVENT)
    if (
        len(per_trace) >= 3
        and all(n == 1 for n in per_trace.values())
        and not any(RUN_IDS_ATTR in r.attributes for r in records)
    ):
        warnings.append(
            f"spans each start their own trace ({len(per_trace)} traces of one span): turns "
            "may split per trace; propagate the trace context, or map a conversation id "
            "and turn boundary (conventions.custom)"
        )
    return warnings


def _assembled(records: list[SpanRecord]) -> list[tuple[str, tuple[SpanRecord, ...]]]:
    """The records of each conversation, grouped by the live assembler's rules."""
    from opentelemetry.metrics import NoOpMeter

    from tracepass.collector.instruments import CollectorInstruments

    done = complete_all(records, CollectorInstruments.create(NoOpMeter("inspect")))
    return [(c.key, c.records) for c in done]


def _unclaimed_content(
    request: ExportTraceServiceRequest, records: list[SpanRecord]
) -> dict[SpanKey, list[str]]:
    """Content-carrying attribute keys of the spans no convention claimed."""
    unclaimed = {(r.trace_id, r.span_id) for r in records if not r.attributes.get(CONVENTION_ATTR)}
    out: dict[SpanKey, list[str]] = {}
    if not unclaimed:
        return out
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                key = (span.trace_id.hex(), span.span_id.hex())
                if key in unclaimed:
                    found = sorted(
                        kv.key for kv in span.attributes if kv.key.startswith(_CONTENT_KEYS)
                    )
                    if found:
                        out[key] = found
    return out


def _conversation(
    key: str, records: Sequence[SpanRecord], content_keys: Mapping[SpanKey, list[str]]
) -> ConversationReport:
    index: dict[SpanKey, SpanRecord] = {}
    for rec in records:
        index.setdefault((rec.trace_id, rec.span_id), rec)
    joined = dict(index)
    orphans = join_log_events(joined)
    conversation = build_conversation(key, records)
    members = _turn_members(joined, conversation)
    turns = [
        _turn(i, turn, members.get((turn.trace_id or "", turn.span_id or ""), []), content_keys)
        for i, turn in enumerate(conversation.turns)
    ]
    warnings = [f"{orphans} log event(s) name a span that is not in the input"] if orphans else []
    return ConversationReport(
        id=key, turns=turns, warnings=warnings, reference_id=conversation.reference_id
    )


def _turn_members(
    index: Mapping[SpanKey, SpanRecord], conversation: Conversation
) -> dict[SpanKey, list[SpanRecord]]:
    """Every span record under each turn's root (a turn-less trace: the whole trace)."""
    roots = {(t.trace_id or "", t.span_id or "") for t in conversation.turns}
    # Traces without agent spans: their turn is the trace root, and owns the whole trace.
    turnless = {
        key[0]: key
        for key in roots
        if (root := index.get(key)) is not None and root.kind is not RecordKind.TURN
    }
    out: dict[SpanKey, list[SpanRecord]] = defaultdict(list)
    for rec in index.values():
        if rec.kind is RecordKind.EVENT or rec.kind is RecordKind.END:
            continue
        top, _ = top_level_turn(rec, index)
        if top is not None and (top.trace_id, top.span_id) in roots:
            out[(top.trace_id, top.span_id)].append(rec)
        elif top is None and rec.trace_id in turnless:
            out[turnless[rec.trace_id]].append(rec)
    for group in out.values():
        group.sort(key=lambda r: (r.start_ns, r.span_id))
    return out


def _content_hints(members: Sequence[SpanRecord]) -> list[str]:
    """What the adapters that read the turn say about content their framework keeps off
    its spans (e.g. agento11y's default protocol), once each."""
    names = {n for r in members for n in r.attributes.get(ADAPTERS_ATTR) or ()}
    return [a.missing_content_hint for a in ADAPTERS if a.name in names and a.missing_content_hint]


def _fields(rec: SpanRecord) -> dict[str, str]:
    found: dict[str, str] = {}
    for name in FIELDS:
        value = getattr(rec, name)
        if value is not None and value != () and value != {}:
            found[name] = source_of(rec, name)
    noted = rec.attributes.get(SOURCES_ATTR)
    if isinstance(noted, dict):  # fields an adapter emptied on purpose
        for name, source in noted.items():
            found.setdefault(name, f"{source} (cleared)")
    return found


def _span(rec: SpanRecord) -> SpanReport:
    role = rec.attributes.get(ROLE_ATTR)
    return SpanReport(
        span_id=rec.span_id,
        name=rec.name,
        kind=rec.kind.value,
        convention=rec.attributes.get(CONVENTION_ATTR) or None,
        adapters=list(rec.attributes.get(ADAPTERS_ATTR) or ()),
        fields=_fields(rec),
        role=role if isinstance(role, str) else None,
    )


def _turn(
    i: int, turn: Turn, members: list[SpanRecord], content_keys: Mapping[SpanKey, list[str]]
) -> TurnReport:
    warnings: list[str] = []
    requested = [c for r in members if r.kind is RecordKind.MODEL for c in r.requested_tool_calls]
    for call in turn.tool_calls:
        warnings.extend(_call_warnings(call, requested))
    warnings.extend(_merged_copies(turn, members))
    for rec in members:
        if rec.kind is RecordKind.TOOL and not rec.tool_name:
            warnings.append(f"tool span {rec.span_id} ({rec.name!r}) has no tool name")
        keys = content_keys.get((rec.trace_id, rec.span_id))
        if keys:
            warnings.append(
                f"span {rec.span_id} ({rec.name!r}) carries {', '.join(keys)} but no "
                "convention claimed it"
            )
    if turn.query is None:
        warnings.append("no query found")
    if turn.answer is None:
        warnings.append("no answer found")
    if turn.query is None or turn.answer is None:
        warnings.extend(_content_hints(members))
    elif _REPR.search(turn.answer):
        warnings.append(f"answer looks like an object repr: {turn.answer[:80]!r}")
    if turn.query is not None and _REPR.search(turn.query):
        warnings.append(f"query looks like an object repr: {turn.query[:80]!r}")
    spans = [_span(r) for r in members]
    return TurnReport(
        index=i,
        trace_id=turn.trace_id,
        query=turn.query,
        answer=turn.answer,
        tool_calls=[
            ToolCallReport(
                name=c.name,
                arguments=dict(c.arguments),
                arguments_source=c.arguments_source,
                has_result=c.result is not None,
                error=c.error,
            )
            for c in turn.tool_calls
        ],
        spans=spans,
        warnings=warnings,
    )


def _merged_copies(turn: Turn, members: Sequence[SpanRecord]) -> list[str]:
    """Tool names with more tool spans in the turn than calls rebuilt: two copies of
    one call (two instrumentations, or a span and a model request) merged into one."""
    spans = Counter(r.tool_name for r in members if r.kind is RecordKind.TOOL and r.tool_name)
    calls = Counter(c.name for c in turn.tool_calls)
    return [
        f"{name}: {n} tool spans merged into {calls[name]} call(s) (copies of one call)"
        for name, n in sorted(spans.items())
        if calls[name] and n > calls[name]
    ]


def _wrapped_result(result: Any) -> bool:
    """A framework's envelope around the plain result: content blocks `[{"text": …}]`,
    `{"result": …}`, a LlamaIndex `ToolOutput` (`raw_output`)."""
    if isinstance(result, list) and result:
        return all(isinstance(b, dict) and b.keys() == {"text"} for b in result)
    if isinstance(result, dict):
        return result.keys() == {"result"} or {"raw_output", "tool_name"} <= result.keys()
    return False


def _call_warnings(call: ToolCall, requested: list[ToolCall]) -> list[str]:
    warnings: list[str] = []
    args = call.arguments
    keys = frozenset(args)
    if keys in _WRAPPER_KEYS:
        warnings.append(f"{call.name}: arguments still wrapped ({sorted(keys)})")
    elif "_raw" in args:
        warnings.append(f"{call.name}: arguments unreadable, kept raw: {str(args['_raw'])[:60]!r}")
    elif not args and any(r.name == call.name and r.arguments for r in requested):
        warnings.append(f"{call.name}: no arguments although the model requested some")
    elif not args:
        warnings.append(f"{call.name}: no arguments read (a tool without parameters is fine)")
    if _wrapped_result(call.result):
        warnings.append(f"{call.name}: result still wrapped: {str(call.result)[:60]}")
    return warnings
