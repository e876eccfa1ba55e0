"""Chat messages in the shapes instrumentations write them, reduced to what scoring needs.

One `Message` (role, text, requested tool calls) is read from:
- OTel GenAI semconv: `{"role", "parts": [{"type": "text"|"tool_call"|…}], "finish_reason"}`
  (and the older `{"role", "content"}` form);
- LangChain serializations found in chain state: `{"lc": 1, "id": [..., "AIMessage"],
  "kwargs": {...}}`, `{"type": "ai", "data": {...}}`, `{"type": "human", "content": …}`,
  `("user", "text")` tuples and bare strings;
- flattened attribute lists (`llm.input_messages.0.message.role`, `gen_ai.prompt.0.role`).

Query and answer of a turn come from the chain state: the last user message is the
query, the last assistant message the answer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tracepass.collector.records import NOT_JSON, coerce_arguments, loads
from tracepass.evaluator.models import ToolCall

USER = "user"
ASSISTANT = "assistant"
TOOL = "tool"
SYSTEM = "system"

_ROLE = {
    "user": USER,
    "human": USER,
    "humanmessage": USER,
    "humanmessagechunk": USER,
    "assistant": ASSISTANT,
    "ai": ASSISTANT,
    "model": ASSISTANT,
    "aimessage": ASSISTANT,
    "aimessagechunk": ASSISTANT,
    "tool": TOOL,
    "function": TOOL,
    "toolmessage": TOOL,
    "toolmessagechunk": TOOL,
    "functionmessage": TOOL,
    "system": SYSTEM,
    "developer": SYSTEM,
    "systemmessage": SYSTEM,
}


@dataclass(slots=True)
class Message:
    role: str
    text: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()


def role_of(raw: Any) -> str:
    if not isinstance(raw, str):
        return ""
    return _ROLE.get(raw.lower(), raw.lower())


def content_text(content: Any) -> str | None:
    """Text of a message content: a string, or a list of blocks whose text parts are
    joined (LangChain/OpenAI `{"type": "text", "text"}`, semconv `{"content"}`)."""
    if content is None:
        return None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        pieces: list[str] = []
        for block in content:
            if isinstance(block, str):
                pieces.append(block)
            elif isinstance(block, dict) and block.get("type", "text") == "text":
                text = block.get("text", block.get("content"))
                if isinstance(text, str):
                    pieces.append(text)
        return "\n".join(pieces) if pieces else None
    return None


def make_tool_call(name: Any, arguments: Any, call_id: Any) -> ToolCall:
    # model_construct: the fields are already the right types, validation would only
    # cost time on the hot path.
    return ToolCall.model_construct(
        name=str(name),
        arguments=coerce_arguments(arguments),
        result=None,
        error=None,
        call_id=call_id if isinstance(call_id, str) and call_id else None,
        start_ns=None,
        arguments_source="model_request",
    )


def _langchain_tool_calls(raw: Any) -> tuple[ToolCall, ...]:
    if not isinstance(raw, list) or not raw:
        return ()
    calls: list[ToolCall] = []
    for tc in raw:
        if not isinstance(tc, dict):
            continue
        fn = tc.get("function")
        if isinstance(fn, dict):  # OpenAI shape inside additional_kwargs
            calls.append(make_tool_call(fn.get("name", ""), fn.get("arguments"), tc.get("id")))
        elif "name" in tc:
            calls.append(
                make_tool_call(tc["name"], tc.get("args", tc.get("arguments")), tc.get("id"))
            )
    return tuple(calls)


def _part_text(part: dict[str, Any]) -> str | None:
    """Text of one message part: semconv `{"type": "text", "content"}`, or a Gemini
    `Part` (`{"text": …}`, no type) as ADK's per-message events write them."""
    ptype = part.get("type")
    if ptype == "text":
        content = part.get("content")
    elif ptype is None:
        content = part.get("text")
    else:
        return None
    return content if isinstance(content, str) else None


def _semconv_parts(role: str, parts: list[Any], with_calls: bool = True) -> Message:
    texts: list[str] = []
    calls: list[ToolCall] = []
    for part in parts:
        if not isinstance(part, dict):
            continue
        text = _part_text(part)
        if text is not None:
            texts.append(text)
        elif with_calls:
            ptype = part.get("type")
            if ptype == "tool_call":
                calls.append(
                    make_tool_call(part.get("name", ""), part.get("arguments"), part.get("id"))
                )
            elif ptype is None and isinstance(fc := part.get("function_call"), dict):
                calls.append(make_tool_call(fc.get("name", ""), fc.get("args"), fc.get("id")))
    return Message(role, "\n".join(texts) if texts else None, tuple(calls))


def response_key(call_id: str, arguments: Any) -> str:
    """The key of a tool response whose call id is not unique in the history: the id and
    the arguments of the request it answers (see `tool_responses`)."""
    return call_id + "\n" + json.dumps(coerce_arguments(arguments), sort_keys=True, default=str)


def tool_responses(value: Any) -> dict[str, Any]:
    """Tool results that a model call's input messages carry, by tool-call id: semconv
    `{"type": "tool_call_response", "id", "response"}` parts and Gemini
    `{"function_response": {"id", "response"}}` parts. Stacks whose tool spans record no
    result (ADK with content in log events) show it only there.

    Some instrumentations make ids up per message (the google-genai one numbers a
    message's calls `book_flight_0`, `book_flight_1`, …), so the same id answers several
    calls of a history. A response whose id occurs more than once is also kept under
    `response_key(id, arguments of the request it follows)`, so each call finds its own.

    Others take the two sides' ids from different fields (OpenLLMetry on the Responses
    API: the request's item id `fc_…`, the response's `call_…`). A response whose id no
    request in the history has answers the oldest request still unanswered (responses
    follow their requests in order) and is also kept under that request's id.
    """
    decoded = loads(value) if isinstance(value, str) else value
    if not isinstance(decoded, list):
        return {}
    out: dict[str, Any] = {}
    requests: dict[str, Any] = {}  # id → arguments of the latest request with that id
    unanswered: list[str] = []  # request ids in history order, not answered yet
    paired: list[tuple[str, Any, Any]] = []  # (id, request arguments, response)
    repeated = False
    for message in decoded:
        parts = message.get("parts") if isinstance(message, dict) else None
        if not isinstance(parts, list):
            continue
        for part in parts:
            if not isinstance(part, dict):
                continue
            if part.get("type") == "tool_call":
                call_id = part.get("id")
                if isinstance(call_id, str) and call_id:
                    requests[call_id] = part.get("arguments")
                    unanswered.append(call_id)
                continue
            holder = (
                part if part.get("type") == "tool_call_response" else part.get("function_response")
            )
            if isinstance(holder, dict):
                call_id = holder.get("id")
                if isinstance(call_id, str) and call_id and "response" in holder:
                    repeated = repeated or call_id in out
                    out[call_id] = holder["response"]
                    paired.append((call_id, requests.get(call_id), holder["response"]))
                    if call_id in requests:
                        if call_id in unanswered:
                            unanswered.remove(call_id)
                    elif unanswered:
                        out.setdefault(unanswered.pop(0), holder["response"])
    if repeated:
        counts: dict[str, int] = {}
        for call_id, _, _ in paired:
            counts[call_id] = counts.get(call_id, 0) + 1
        for call_id, arguments, response in paired:
            if counts[call_id] > 1 and arguments is not None:
                out[response_key(call_id, arguments)] = response
    return out


def parse_message(obj: Any, with_calls: bool = True) -> Message | None:
    """One message in any supported shape, or None when `obj` is not a message.
    `with_calls=False` skips building tool calls (input histories only need text)."""
    if isinstance(obj, dict):
        parts = obj.get("parts")
        if isinstance(parts, list):
            return _semconv_parts(role_of(obj.get("role")), parts, with_calls)
        if obj.get("lc") == 1:
            ident = obj.get("id")
            kwargs = obj.get("kwargs")
            if isinstance(ident, list) and ident and isinstance(kwargs, dict):
                return Message(
                    role_of(ident[-1]),
                    content_text(kwargs.get("content")),
                    _langchain_tool_calls(kwargs.get("tool_calls")) if with_calls else (),
                )
            return None
        data = obj.get("data")
        if isinstance(data, dict) and "type" in obj:
            return Message(
                role_of(obj["type"]),
                content_text(data.get("content")),
                _langchain_tool_calls(data.get("tool_calls")) if with_calls else (),
            )
        role = obj.get("role", obj.get("type"))
        if isinstance(role, str) and ("content" in obj or "tool_calls" in obj):
            calls = _langchain_tool_calls(obj.get("tool_calls")) if with_calls else ()
            return Message(role_of(role), content_text(obj.get("content")), calls)
        return None
    if isinstance(obj, list | tuple) and len(obj) == 2 and isinstance(obj[0], str):
        return Message(role_of(obj[0]), content_text(obj[1]))
    if isinstance(obj, str):
        return Message(USER, obj)
    return None


def parse_messages(value: Any) -> list[Message]:
    """A JSON (or structured) list of messages; unreadable input gives []."""
    decoded = loads(value) if isinstance(value, str) else value
    if not isinstance(decoded, list):
        if isinstance(decoded, dict):  # a single message object
            one = parse_message(decoded)
            return [one] if one is not None else []
        return []
    out: list[Message] = []
    for item in decoded:
        msg = parse_message(item)
        if msg is not None:
            out.append(msg)
    return out


def _parts_text(parts: list[Any]) -> str | None:
    """Joined text parts of a semconv message (what `_semconv_parts` computes as text)."""
    texts = [
        text for part in parts if isinstance(part, dict) and (text := _part_text(part)) is not None
    ]
    return "\n".join(texts) if texts else None


def _semconv_role(item: dict[str, Any]) -> str:
    raw = item.get("role")
    if raw.__class__ is str:
        # `_ROLE` keys are lower case: an exact hit equals `role_of`'s answer.
        folded = _ROLE.get(raw)
        return folded if folded is not None else role_of(raw)
    return role_of(raw)


def last_text_in(value: Any, role: str) -> str | None:
    """Text of the last message with `role` in a JSON list of messages, parsing from the
    end and only as far as needed (input histories grow with every turn)."""
    decoded = loads(value) if isinstance(value, str) else value
    if isinstance(decoded, dict):
        decoded = [decoded]
    if not isinstance(decoded, list):
        return None
    return _last_text_raw(decoded, role)


def _last_text_raw(items: list[Any], role: str) -> str | None:
    for item in reversed(items):
        # Semconv messages (`{"role", "parts"}`) are read in place: only the text of the
        # message that matches is built, no `Message` per item.
        if item.__class__ is dict and (parts := item.get("parts")).__class__ is list:
            raw = item.get("role")
            if raw != role and _semconv_role(item) != role:
                continue
            if len(parts) == 1:  # the usual single text part, without the general loop
                part = parts[0]
                if part.__class__ is dict and part.get("type") == "text":
                    content = part.get("content")
                    return content if isinstance(content, str) else None
            return _parts_text(parts)
        msg = parse_message(item, with_calls=False)
        if msg is not None and msg.role == role:
            return msg.text
    return None


def output_text_in(value: Any) -> str | None:
    """`output_text(parse_messages(value))` without building tool calls or `Message`s:
    a turn needs only the assistant's text, not the calls a model output may carry."""
    decoded = loads(value) if isinstance(value, str) else value
    if isinstance(decoded, dict):
        decoded = [decoded]
    if not isinstance(decoded, list):
        return None
    texts: list[str] = []
    for item in decoded:
        if item.__class__ is dict and (parts := item.get("parts")).__class__ is list:
            if item.get("role") == ASSISTANT or _semconv_role(item) in (ASSISTANT, ""):
                if len(parts) == 1 and (part := parts[0]).__class__ is dict:
                    text = part.get("content") if part.get("type") == "text" else None
                    if text and isinstance(text, str):
                        texts.append(text)
                else:
                    text = _parts_text(parts)
                    if text:
                        texts.append(text)
            continue
        msg = parse_message(item, with_calls=False)
        if msg is not None and msg.role in (ASSISTANT, "") and msg.text:
            texts.append(msg.text)
    return "\n".join(texts) if texts else None


def answer_text_in(value: Any) -> str | None:
    """A turn's answer from its output messages: the text of the **last** assistant
    message that has text. A multi-step turn may list each step's assistant message; the
    last step's is the answer (joining them would repeat intermediate remarks). One
    message of several text parts is still joined (`output_text_in`)."""
    decoded = loads(value) if isinstance(value, str) else value
    if isinstance(decoded, dict):
        decoded = [decoded]
    if not isinstance(decoded, list):
        return None
    if len(decoded) == 1:  # the usual single output message
        return output_text_in(decoded)
    for item in reversed(decoded):
        text = output_text_in([item])
        if text:
            return text
    return None


def last_text(messages: list[Message], role: str) -> str | None:
    for msg in reversed(messages):
        if msg.role == role:
            return msg.text
    return None


def output_text(messages: list[Message]) -> str | None:
    """Text the model produced: assistant messages' text, joined."""
    texts = [m.text for m in messages if m.role in (ASSISTANT, "") and m.text]
    return "\n".join(texts) if texts else None


def requested_tool_calls(messages: list[Message]) -> tuple[ToolCall, ...]:
    calls: tuple[ToolCall, ...] = ()
    for msg in messages:
        if msg.tool_calls:
            calls += msg.tool_calls
    return calls


# --------------------------------------------------------------------------- chain state

_QUERY_KEYS = ("input", "query", "question", "user_input", "prompt", "message")
_ANSWER_KEYS = ("output", "answer", "response", "result", "final_answer", "text")


def _state_message_list(state: Any) -> list[Any] | None:
    """The raw message list of a chain state (`{"messages": [...]}` or a bare list)."""
    if isinstance(state, dict):
        msgs = state.get("messages")
        if isinstance(msgs, list):
            if (
                len(msgs) == 1
                and isinstance(msgs[0], list)
                and msgs[0]
                and not isinstance(msgs[0][0], str)
            ):
                return msgs[0]  # chat-model callback input: [[message, …]]
            return msgs
        return [state] if parse_message(state, with_calls=False) is not None else None
    if isinstance(state, list):
        return state
    return None


def _chain_state(value: Any) -> Any:
    """A chain input or output decoded: its JSON value, or the text itself when it is
    text but not JSON (None when empty)."""
    state = loads(value) if isinstance(value, str) else value
    if state is NOT_JSON:
        return value if isinstance(value, str) and value else None
    return state


def query_from_state(value: Any) -> str | None:
    """The user's query in a chain input: JSON state with `messages` (last user message),
    a dict with an `input`-like key, or plain text."""
    state = _chain_state(value)
    if state is None or isinstance(state, str):
        return state
    msgs = _state_message_list(state)
    if msgs:
        text = _last_text_raw(msgs, USER)
        if text is not None:
            return text
    if isinstance(state, dict):
        for key in _QUERY_KEYS:
            candidate = state.get(key)
            if isinstance(candidate, str):
                return candidate
        if len(state) == 1:
            # One wrapping key around the inputs (DSPy modules' `{"input_args": {…}}`,
            # a call's `{"kwargs": {…}}`): read the inputs once.
            (inner,) = state.values()
            if isinstance(inner, dict):
                for key in _QUERY_KEYS:
                    candidate = inner.get(key)
                    if isinstance(candidate, str):
                        return candidate
    return None


def answer_from_state(value: Any) -> str | None:
    """The final answer in a chain output: the last assistant message of the state (its
    text, None when it only requested tools), an `output`-like key, or plain text."""
    state = _chain_state(value)
    if state is None or isinstance(state, str):
        return state
    msgs = _state_message_list(state)
    if msgs:
        for item in reversed(msgs):
            msg = parse_message(item, with_calls=False)
            if msg is not None and msg.role == ASSISTANT:
                return msg.text or None
    if isinstance(state, dict):
        for key in _ANSWER_KEYS:
            candidate = state.get(key)
            if isinstance(candidate, str):
                return candidate
            if isinstance(candidate, dict):
                one = parse_message(candidate)
                if one is not None and one.role == ASSISTANT:
                    return one.text or None
    return None


# --------------------------------------------------------------------------- flattened lists


def flattened_messages(
    attrs: dict[str, Any], prefix: str, style: str, *, with_calls: bool = True
) -> list[Message]:
    """Messages flattened into attributes.

    style "oi": `{prefix}.{i}.message.role|content|tool_calls.{j}.tool_call.function.name`
    (OpenInference); style "legacy": `{prefix}.{i}.role|content|tool_calls.{j}.name`
    (old OpenLLMetry `gen_ai.prompt` / `gen_ai.completion`).
    """
    out: list[Message] = []
    mid = ".message." if style == "oi" else "."
    i = 0
    while True:
        base = f"{prefix}.{i}{mid}"
        role = attrs.get(base + "role")
        content = attrs.get(base + "content")
        tc_base = base + "tool_calls.0."
        has_calls = (tc_base + ("tool_call.function.name" if style == "oi" else "name")) in attrs
        if (
            role is None
            and content is None
            and not has_calls
            and (style != "oi" or base + "contents.0.message_content.text" not in attrs)
        ):
            break
        text = content if isinstance(content, str) else None
        if text is None and style == "oi":
            pieces: list[str] = []
            j = 0
            while (key := f"{base}contents.{j}.message_content.text") in attrs:
                piece = attrs[key]
                if isinstance(piece, str):
                    pieces.append(piece)
                j += 1
            text = "\n".join(pieces) if pieces else None
        calls: list[ToolCall] = []
        if has_calls and with_calls:
            j = 0
            while True:
                cb = f"{base}tool_calls.{j}."
                if style == "oi":
                    name = attrs.get(cb + "tool_call.function.name")
                    args = attrs.get(cb + "tool_call.function.arguments")
                    call_id = attrs.get(cb + "tool_call.id")
                else:
                    name = attrs.get(cb + "name")
                    args = attrs.get(cb + "arguments")
                    call_id = attrs.get(cb + "id")
                if name is None:
                    break
                calls.append(make_tool_call(name, args, call_id))
                j += 1
        out.append(Message(role_of(role) if role is not None else "", text, tuple(calls)))
        i += 1
    return out


def flattened_tool_responses(
    attrs: dict[str, Any], prefix: str, style: str, messages: list[Message]
) -> dict[str, Any]:
    """Tool results a model call's flattened input messages carry, by tool-call id: the
    `tool`-role messages with their call id (`{prefix}.{i}.message.tool_call_id` in
    OpenInference, `{prefix}.{i}.tool_call_id` in old OpenLLMetry `gen_ai.prompt`).
    `messages` is `flattened_messages` of the same prefix (its roles are reused, so only
    tool messages cost lookups).

    Why: an application that runs tools itself (a hand-rolled chat-completions loop)
    has no tool spans; the tool messages it sends back are the only record of results.
    """
    out: dict[str, Any] = {}
    mid = ".message." if style == "oi" else "."
    for i, message in enumerate(messages):
        if message.role == TOOL:
            base = f"{prefix}.{i}{mid}"
            call_id = attrs.get(base + "tool_call_id")
            content = attrs.get(base + "content")
            if call_id.__class__ is str and call_id and content is not None:
                out[call_id] = content
    return out
