"""How the state file spells things: span records (compact JSON arrays) and stored
evaluations (versioned JSON of the data, not of any API view).

Never pickled: the file may outlive the code version and must not execute anything on
load. Stored evaluations carry `"v": RESULT_FORMAT`; rows written before the format had a
version are the conversation API's view JSON and are read by `_from_view` (the upgrade
path: nothing is rewritten on disk, old rows decode to the same data).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracepass.collector.records import ModelUsage, RecordKind, SpanRecord
from tracepass.evaluator.models import (
    Conversation,
    ConversationResult,
    ToolCall,
    ToolDefinition,
    Turn,
)

__all__ = [
    "RESULT_FORMAT",
    "StoredResult",
    "ToolsByDigest",
    "decode_record",
    "decode_result",
    "encode_record",
    "encode_request",
    "encode_result",
    "encode_routing",
]

RESULT_FORMAT = 4
# Format 2 wrote every result turn's query, answer and tool calls, which are the scored
# conversation's (the same objects: the evaluator copies them into its turn results), and
# every default-valued field; format 3 leaves both out when that holds (`"turn_io": 1`)
# and decode puts them back. Format 4 (a) writes the conversation without its None
# values rather than without its default values (pydantic's `exclude_none` skips the
# comparison of every field with its default: ~18 % less time for ~6 % more bytes; the
# same data, as no field of the conversation's models defaults to anything but None
# where None is allowed: tests/collector/test_reference_tools.py checks it), and (b)
# when `"tools":"<digest>"` is given, its result turns leave out their reference's
# expected tools, stored once in the store's `reference_tools` table
# (`reference_tools.py`). All four are read.
_READ_FORMATS = (2, 3, RESULT_FORMAT)
_WITHOUT_TURN_IO: dict[str, dict[str, set[str]]] = {
    "turns": {"__all__": {"query", "answer", "tool_calls"}}
}
_WITHOUT_TOOLS: dict[str, dict[str, set[str]]] = {"turns": {"__all__": {"expected_tools"}}}
_WITHOUT_TURN_IO_AND_TOOLS: dict[str, dict[str, set[str]]] = {
    "turns": {"__all__": {"query", "answer", "tool_calls", "expected_tools"}}
}


def _fallback(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return value.hex()
    if isinstance(value, set | frozenset):
        return sorted(value, key=repr)
    return repr(value)


# One encoder reused: json.dumps with non-default options builds a new encoder per call.
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=_fallback)
_encode = _ENCODER.encode


def encode_routing(routing: list[Any]) -> str:
    """A request row's routing (which conversation each record went to)."""
    return _encode(routing)


def encode_record(rec: SpanRecord) -> str:
    calls = rec.requested_tool_calls
    return _encode(
        [
            rec.trace_id,
            rec.span_id,
            rec.parent_span_id,
            rec.kind.value,
            rec.name,
            rec.start_ns,
            rec.end_ns,
            rec.conversation_id,
            rec.reference_id,
            rec.agent_name,
            rec.agent_version,
            rec.service_name,
            rec.input_text,
            rec.output_text,
            rec.tool_name,
            rec.tool_call_id,
            rec.tool_arguments,
            rec.tool_result,
            rec.error,
            [tc.model_dump(mode="json") for tc in calls] if calls else [],
            rec.final_answer_uses_tools,
            rec.attributes,
            None
            if rec.tool_definitions is None
            else [d.model_dump(mode="json") for d in rec.tool_definitions],
            _encode_usage(rec.usage),
        ]
    )


def _encode_usage(usage: ModelUsage | None) -> list[Any] | None:
    if usage is None:
        return None
    return [
        usage.input_tokens,
        usage.output_tokens,
        usage.cached_input_tokens,
        usage.reasoning_tokens,
        usage.provider,
        usage.problem,
        usage.cache_write_input_tokens,
        usage.cost_usd,
    ]


def _decode_usage(fields: list[Any]) -> ModelUsage | None:
    """A record's usage (element 23; absent in rows written before usage was read)."""
    if len(fields) < 24 or fields[23] is None:
        return None
    u = fields[23]
    return ModelUsage(
        input_tokens=u[0],
        output_tokens=u[1],
        cached_input_tokens=u[2],
        reasoning_tokens=u[3],
        provider=u[4],
        problem=u[5],
        # Elements 6-7 are absent in rows written before they were read.
        cache_write_input_tokens=u[6] if len(u) > 6 else None,
        cost_usd=u[7] if len(u) > 7 else None,
    )


def encode_request(request: ExportTraceServiceRequest | ExportLogsServiceRequest) -> bytes:
    """What `batch` durability stores per export request (traces or logs): its protobuf
    bytes."""
    return request.SerializeToString()


def decode_record(text: str) -> SpanRecord:
    f = json.loads(text)
    return SpanRecord(
        trace_id=f[0],
        span_id=f[1],
        parent_span_id=f[2],
        kind=RecordKind(f[3]),
        name=f[4],
        start_ns=f[5],
        end_ns=f[6],
        conversation_id=f[7],
        reference_id=f[8],
        agent_name=f[9],
        agent_version=f[10],
        service_name=f[11],
        input_text=f[12],
        output_text=f[13],
        tool_name=f[14],
        tool_call_id=f[15],
        tool_arguments=f[16],
        tool_result=f[17],
        error=f[18],
        requested_tool_calls=tuple(ToolCall.model_validate(d) for d in f[19]),
        final_answer_uses_tools=f[20],
        attributes=f[21],
        # absent in rows written before tool definitions were recorded
        tool_definitions=None
        if len(f) < 23 or f[22] is None
        else tuple(ToolDefinition.model_validate(d) for d in f[22]),
        usage=_decode_usage(f),
    )


# ------------------------------------------------------------------------ evaluations


@dataclass(frozen=True, slots=True)
class StoredResult:
    """One conversation's latest evaluation as stored: the conversation that was scored,
    its result and which revision it is."""

    conversation: Conversation
    result: ConversationResult | None
    revision: int


def _shares_turn_io(conversation: Conversation, result: ConversationResult) -> bool:
    """Whether each result turn's query and answer equal its conversation turn's and its
    tool calls are the same objects, as the evaluator builds them (equal by value is not
    enough: `{"n": 1} == {"n": 1.0}`, and the stored JSON must not change)."""
    turns = conversation.turns
    if len(result.turns) != len(turns):
        return False
    for rt, ct in zip(result.turns, turns, strict=True):
        if rt.tool_calls is not ct.tool_calls or rt.query != ct.query or rt.answer != ct.answer:
            return False
    return True


def encode_result(stored: StoredResult, tools: str | None = None) -> str:
    """The data as JSON, written by pydantic's compiled serializer (`model_dump_json`:
    this runs once per evaluated conversation): the conversation without None values,
    the result without default-valued fields and without the result turns' copy of the
    conversation's queries, answers and tool calls (`"turn_io": 1`; `decode_result`
    restores them). A non-finite float (no score is one) is written as null.

    `tools`: the digest of the `reference_tools` row holding the result's expected
    tools (`ReferenceTools.of`): the result turns leave them out. Without it the row
    carries them itself."""
    result = stored.result
    conversation = stored.conversation.model_dump_json(exclude_none=True, fallback=_fallback)
    named = "" if tools is None or result is None else f',"tools":"{tools}"'
    if result is None:
        body, shared = "null", ""
    elif _shares_turn_io(stored.conversation, result):
        body = result.model_dump_json(
            exclude=_WITHOUT_TURN_IO if not named else _WITHOUT_TURN_IO_AND_TOOLS,
            exclude_defaults=True,
            fallback=_fallback,
        )
        shared = ',"turn_io":1'
    else:
        body = result.model_dump_json(
            exclude=_WITHOUT_TOOLS if named else None,
            exclude_defaults=True,
            fallback=_fallback,
        )
        shared = ""
    return (
        f'{{"v":{RESULT_FORMAT},"revision":{int(stored.revision)}{shared}{named},'
        f'"conversation":{conversation},"result":{body}}}'
    )


class ToolsByDigest(Protocol):
    """Resolves a format-4 row's `"tools"` digest to its per-turn list (parsed JSON:
    one entry per result turn, a list of expected tools or None); raises ValueError
    when the store lacks it (`reference_tools.ToolsLookup`)."""

    def __call__(self, digest: str) -> list[Any]: ...


def decode_result(text: str, tools: ToolsByDigest | None = None) -> StoredResult:
    """A stored row of any format; `tools` resolves format 4's expected tools (the
    store's `reference_tools`; ValueError if a row needs it and none is given)."""
    data: dict[str, Any] = json.loads(text)
    if "v" not in data:
        return _from_view(data)
    if data["v"] not in _READ_FORMATS:
        raise ValueError(f"stored result format {data['v']!r} is newer than this collector")
    conversation = Conversation.model_validate(data["conversation"])
    result = data["result"]
    if result is not None and data.get("turn_io"):
        turns = result.get("turns") or []
        if len(turns) != len(conversation.turns):
            raise ValueError("stored result turns do not match its conversation's")
        for turn, source in zip(turns, conversation.turns, strict=True):
            # Validated models are accepted as they are (not copied or re-checked).
            turn["query"] = source.query
            turn["answer"] = source.answer
            turn["tool_calls"] = source.tool_calls
    digest = data.get("tools")
    if result is not None and digest is not None:
        if tools is None:
            raise ValueError(f"stored result names expected tools {digest!r}: no table given")
        per_turn = tools(str(digest))
        turns = result.get("turns") or []
        if len(per_turn) != len(turns):
            raise ValueError(f"expected tools {digest!r} do not match the result's turns")
        for turn, expected in zip(turns, per_turn, strict=True):
            if expected is not None:
                turn["expected_tools"] = expected
    return StoredResult(
        conversation=conversation,
        result=None if result is None else ConversationResult.model_validate(result),
        revision=int(data["revision"]),
    )


def _from_view(view: dict[str, Any]) -> StoredResult:
    """Rows written before results were versioned held the API's view JSON: rebuild the
    data it shows (the view carried every conversation field it renders)."""
    agent = view.get("agent") or {}
    conversation = Conversation(
        id=view["conversation_id"],
        agent_name=agent.get("name"),
        agent_version=agent.get("version"),
        trace_ids=tuple(view.get("trace_ids") or ()),
        complete=bool(view.get("complete", True)),
        turns=tuple(
            Turn(
                query=t.get("query"),
                answer=t.get("answer"),
                tool_calls=tuple(ToolCall.model_validate(c) for c in t.get("tool_calls") or ()),
            )
            for t in view.get("turns") or ()
        ),
    )
    evaluation = view.get("evaluation")
    return StoredResult(
        conversation=conversation,
        result=None if evaluation is None else ConversationResult.model_validate(evaluation),
        revision=int(view.get("revision", 0)),
    )
