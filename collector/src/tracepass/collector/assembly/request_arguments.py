"""Tool-call arguments from the model's request (and results from the model's later
input), when the tool span lacks them.

Some stacks record a tool span without arguments, or with a bare string where the tool
takes named arguments (LangGraph + OpenInference: a single-argument tool's `input.value`
is `"Paris"`, read as `{"_raw": "Paris"}`), while the model call that issued the call
recorded the full request (`{"city": "Paris"}`). Within one turn, each such tool record
is matched to a requested call by tool-call id, else by name and order (the earliest
unmatched request of that name from a model call that started before the tool), and the
request's arguments are used; `ToolCall.arguments_source` says where each set came from.

Likewise a tool span without a result (ADK with content in log events) gets the
`tool_call_response` the next model call's input carries for its call id. ADK writes a
function response as `{"result": value}` for non-dict results and `{"error": text}` for
a failed call (its span only says `TOOL_ERROR`): a response that is exactly one of those
is unwrapped to the value, or to the call's error text (also when it arrives as JSON
text, as in a chat-completions `tool` message); provider content blocks
`[{"text": …}]` (Strands / Bedrock) to their text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from tracepass.collector.normalize import (
    SOURCE_ATTRIBUTE,
    SOURCE_MODEL_REQUEST,
    SOURCES_ATTR,
    TOOL_RESPONSE_NAMES_ATTR,
    TOOL_RESPONSES_ATTR,
    response_key,
    source_of,
)
from tracepass.collector.records import RAW_KEY, SpanRecord, coerce_result, stored_tool_arguments
from tracepass.evaluator.models import ToolCall, construct_unchecked

MISSING = object()

# Keys that mean "the span had no named arguments": a raw text and positional values.
_UNNAMED = frozenset({RAW_KEY, "_args"})


def lacks_named_arguments(arguments: dict[str, object] | None) -> bool:
    return not arguments or arguments.keys() <= _UNNAMED


def _unwrap_response(response: object, error: str | None) -> tuple[object, str | None]:
    """(result, error) of a `tool_call_response`: `{"result": v}` → v; `{"error": text}`
    → no result, the text as the error (kept if the span's error already says it).

    A response that is JSON text is decoded first: chat-completions `tool` messages are
    text, so a hand-rolled loop (or any OpenAI-shaped stack) sends the same
    `{"error": text}` object as a JSON string."""
    if isinstance(response, str):
        response = coerce_result(response)
    if isinstance(response, dict) and len(response) == 1:
        if "result" in response:
            return coerce_result(response["result"]), error
        text = response.get("error")
        if isinstance(text, str):
            return None, error if error and text in error else text
    blocks = _text_blocks(response)
    if blocks is not None:  # provider content blocks `[{"text": …}]` (Bedrock, Strands)
        return coerce_result(blocks), error
    return coerce_result(response), error


def _text_blocks(value: object) -> str | None:
    if not isinstance(value, list) or not value:
        return None
    texts = [b.get("text") for b in value if isinstance(b, dict) and b.keys() == {"text"}]
    if len(texts) != len(value) or not all(isinstance(t, str) for t in texts):
        return None
    return "\n".join(t for t in texts if isinstance(t, str))


def _texts(call: ToolCall) -> list[str]:
    return [v if isinstance(v, str) else str(v) for v in call.arguments.values()]


@dataclass(slots=True)
class Responses:
    """Tool results found outside the tool spans (model inputs, adapters): by call id,
    and the tool name of each id where known."""

    by_id: dict[str, object] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)

    def get(self, call_id: str, arguments: dict[str, object]) -> object:
        """The response to the call with this id and these arguments (ids some
        instrumentations make up repeat within a history), else to this id; `MISSING`."""
        if len(self.by_id) > 1:  # a repeated id always leaves two keys
            found = self.by_id.get(response_key(call_id, arguments), MISSING)
            if found is not MISSING:
                return found
        return self.by_id.get(call_id, MISSING)

    def take_by_name(self, name: str, used: set[str]) -> str | None:
        """The first id of a response for `name` not used yet (calls without ids)."""
        for call_id, known in self.names.items():
            if known == name and call_id not in used:
                used.add(call_id)
                return call_id
        return None


def responses_of(records: Sequence[SpanRecord]) -> Responses:
    """Tool results by call id that the records carry (model inputs, adapters)."""
    out = Responses()
    for rec in records:
        found = rec.attributes.get(TOOL_RESPONSES_ATTR)
        if isinstance(found, dict):
            out.by_id.update(found)
        names = rec.attributes.get(TOOL_RESPONSE_NAMES_ATTR)
        if isinstance(names, dict):
            out.names.update(names)
    return out


def requested_calls(models: Sequence[SpanRecord], responses: Responses) -> tuple[ToolCall, ...]:
    """For stacks that emit no tool spans: the calls the models requested, with the
    results the responses give for their ids (for calls recorded without an id: the
    responses of that tool name, in order)."""
    out: list[ToolCall] = []
    used = {c.call_id for m in models for c in m.requested_tool_calls if c.call_id}
    for model in models:
        for call in model.requested_tool_calls:
            call_id = call.call_id or responses.take_by_name(call.name, used)
            found = MISSING if call_id is None else responses.get(call_id, call.arguments)
            if call.result is None and found is not MISSING:
                result, error = _unwrap_response(found, call.error)
                call = call.model_copy(
                    update={"result": result, "error": error, "call_id": call_id}
                )
            out.append(call)
    return tuple(out)


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
    if responses is None:
        responses = responses_of(models)
    if not requested and not responses.by_id:
        return _span_calls(tools, agents)
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


def _span_calls(
    tools: Sequence[SpanRecord], agents: Sequence[str | None] | None
) -> tuple[ToolCall, ...]:
    """`tool_calls` for the usual turn: no model request to match and no response to
    look up, so each call is its tool record's own, in one pass (no per-turn lists of
    arguments, matches and agents)."""
    out: list[ToolCall] = []
    for t, rec in enumerate(tools):
        # A decoded text is a new dict; a stored dict is copied (see `tool_calls`).
        fresh = stored_tool_arguments(rec).__class__ is str
        args = rec.tool_arguments
        out.append(
            construct_unchecked(
                ToolCall,
                {
                    "name": rec.tool_name or rec.name,
                    "arguments": {} if args is None else args if fresh else dict(args),
                    "result": rec.tool_result,
                    "error": rec.error,
                    "call_id": rec.tool_call_id,
                    "start_ns": rec.start_ns,
                    "arguments_source": SOURCE_ATTRIBUTE
                    if SOURCES_ATTR not in rec.attributes
                    else source_of(rec, "tool_arguments"),
                    "agent": None if agents is None else agents[t],
                },
            )
        )
    return tuple(out)
