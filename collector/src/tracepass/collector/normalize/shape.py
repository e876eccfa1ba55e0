"""Read chat content by its shape, wherever a span carries it: the general reader behind
the conventions.

Why: a stack no convention names still writes its messages in a handful of shapes
(OpenAI chat and Responses, Anthropic, Gemini, LangChain message dicts, MCP tool
results), in attributes of any name, as one JSON blob or flattened
(`gen_ai.prompt.0.content`). This module walks a span's attributes (and, when asked,
its event bodies) for those shapes and returns what they say: the query, the answer,
the tool calls the model requested (with arguments), tool results by call id and
their error flags (`is_error`, `isError`, a tool message's `status: "error"`).
`spans.py` uses it only for what no convention or adapter filled; conventions whose
payloads are such JSON (LangSmith, Logfire) call it for their content.

Which side an attribute is on comes from its key: `prompt`, `input`, `request`,
`messages` … are the input; `completion`, `output`, `response`, `result` … the output;
a key naming neither holds both (a whole conversation, Logfire's `events`).

Bounded like everything a span carries: at most `MAX_ATTRIBUTES` candidate values per
span, each at most `MAX_CHARS` characters of JSON (larger ones are not decoded and are
reported in `unread`), JSON nested at most `MAX_JSON_DEPTH` (records.loads), at most
`MAX_NODES` JSON nodes visited per span (the time bound: the walk is linear in nodes)
and `MAX_DEPTH` levels descended, at most `MAX_MESSAGES` messages kept per side.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from tracepass.collector.normalize.messages import content_text, make_tool_call, role_of
from tracepass.collector.records import NOT_JSON, loads
from tracepass.evaluator.models import ToolCall

__all__ = [
    "MAX_CHARS",
    "MAX_DEPTH",
    "MAX_NODES",
    "ShapeReading",
    "error_flag",
    "read_shape",
    "read_values",
]

MAX_ATTRIBUTES: Final = 64
MAX_CHARS: Final = 1 << 20
MAX_TOTAL_CHARS: Final = 4 << 20
MAX_NODES: Final = 50_000
MAX_DEPTH: Final = 48
MAX_MESSAGES: Final = 1024
MAX_FLAT_INDEX: Final = 512
MAX_UNREAD: Final = 8

INPUT: Final = "input"
OUTPUT: Final = "output"
BOTH: Final = "both"

_OUTPUT_WORDS = ("completion", "output", "response", "result", "answer", "choice")
_INPUT_WORDS = ("prompt", "input", "request", "messages", "query", "question", "history")
_FLAT = re.compile(r"^(.+?)\.(\d{1,4})\.(.+)$")
_TEXT_TYPES = frozenset({"text", "output_text", "input_text"})
_USER = "user"
_ASSISTANT = "assistant"
_TOOL = "tool"


@dataclass(slots=True)
class _Msg:
    role: str
    text: str | None = None
    calls: list[ToolCall] = field(default_factory=list)


@dataclass(slots=True)
class ShapeReading:
    """What the shapes of one span's content say (None / empty: not found)."""

    query: str | None = None
    answer: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    # tool-call id → result, and → error text for results flagged as errors
    tool_results: dict[str, Any] = field(default_factory=dict)
    tool_errors: dict[str, str] = field(default_factory=dict)
    # the output's one tool result without a call id (a tool span's own MCP result /
    # tool message): (result, error text or None); None when there is none
    own_result: tuple[Any, str | None] | None = None
    # attribute keys that looked like content but were not read (size, depth, budget)
    unread: list[str] = field(default_factory=list)
    found: bool = False


class _Walk:
    """One span's walk: the node budget and what was collected per side."""

    __slots__ = ("budget", "chars", "errors", "exhausted", "messages", "own", "results")

    def __init__(self) -> None:
        self.budget = MAX_NODES
        self.chars = MAX_TOTAL_CHARS
        self.exhausted = False
        self.messages: dict[str, list[_Msg]] = {INPUT: [], OUTPUT: [], BOTH: []}
        self.results: dict[str, Any] = {}
        self.errors: dict[str, str] = {}
        self.own: dict[str, tuple[Any, str | None]] = {}

    # ------------------------------------------------------------------ results

    def result(self, side: str, call_id: Any, value: Any, error: bool) -> None:
        result = _plain_content(value)
        text = _error_text(result) if error else None
        if isinstance(call_id, str) and call_id:
            self.results[call_id] = result
            if text is not None:
                self.errors[call_id] = text
        if side != INPUT:
            self.own.setdefault(side, (result, text))

    # ------------------------------------------------------------------ walk

    def walk(self, value: Any, side: str) -> None:
        """Every message-shaped node of `value`, in document order (iterative)."""
        stack: list[tuple[Any, int]] = [(value, 0)]
        out = self.messages[side]
        while stack:
            node, depth = stack.pop()
            self.budget -= 1
            if self.budget < 0:
                self.exhausted = True
                return
            if depth > MAX_DEPTH:
                continue
            if isinstance(node, dict):
                if self._node(node, side, out):
                    continue
                children: list[Any] = [v for v in node.values() if isinstance(v, dict | list)]
            elif isinstance(node, list):
                if (
                    len(node) == 2
                    and isinstance(node[0], str)
                    and isinstance(node[1], str)
                    and role_of(node[0]) in (_USER, _ASSISTANT)
                ):
                    if len(out) < MAX_MESSAGES:
                        out.append(_Msg(role_of(node[0]), node[1]))
                    continue
                children = [v for v in node if isinstance(v, dict | list | str)]
            elif isinstance(node, str) and depth > 0 and node[:1] in "[{" and len(node) > 1:
                # JSON inside JSON (a ToolMessage's content, a wrapped payload)
                self.chars -= len(node)
                decoded = loads(node) if len(node) <= MAX_CHARS and self.chars > 0 else NOT_JSON
                if decoded is not NOT_JSON and isinstance(decoded, dict | list):
                    stack.append((decoded, depth + 1))
                continue
            else:
                continue
            stack.extend((child, depth + 1) for child in reversed(children))

    def _node(self, obj: dict[str, Any], side: str, out: list[_Msg]) -> bool:
        """Read `obj` when it is a message (or a tool result); whether it was one."""
        if obj.get("lc") == 1 and isinstance(obj.get("kwargs"), dict):
            ident = obj.get("id")
            kwargs = obj["kwargs"]
            kind = ident[-1] if isinstance(ident, list) and ident else kwargs.get("type")
            return self._message({**kwargs, "type": kwargs.get("type", kind)}, side, out)
        data = obj.get("data")
        if isinstance(data, dict) and isinstance(obj.get("type"), str) and "content" in data:
            return self._message({**data, "type": obj["type"]}, side, out)
        return self._message(obj, side, out)

    def _message(self, obj: dict[str, Any], side: str, out: list[_Msg]) -> bool:
        otype = obj.get("type")
        # OpenAI Responses items
        if otype == "function_call" and "name" in obj:
            out.append(_Msg(_ASSISTANT, None, [_call(obj, "arguments", "call_id")]))
            return True
        if otype == "function_call_output":
            self.result(side, obj.get("call_id"), obj.get("output"), _flagged(obj))
            return True
        raw_role = obj.get("role")
        if raw_role is None and isinstance(otype, str) and otype != "message":
            raw_role = otype
        role = role_of(raw_role) if isinstance(raw_role, str) else ""
        if role not in (_USER, _ASSISTANT, _TOOL, "system"):
            if ("isError" in obj or "is_error" in obj) and "content" in obj:  # an MCP result
                self.result(side, obj.get("tool_use_id"), obj, _flagged(obj))
                return True
            return False
        content = obj.get("content", obj.get("parts"))
        if "content" not in obj and "parts" not in obj and "tool_calls" not in obj:
            return False
        if role == _TOOL:
            call_id = obj.get("tool_call_id", obj.get("call_id", obj.get("id")))
            structured = _structured(obj)
            self.result(side, call_id, content if structured is None else structured, _flagged(obj))
            return True
        msg = _Msg(role)
        texts: list[str] = []
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            for block in content[:MAX_MESSAGES]:
                self._block(block, side, texts, msg.calls)
        for tc in obj.get("tool_calls") or () if isinstance(obj.get("tool_calls"), list) else ():
            if isinstance(tc, dict):
                fn = tc.get("function")
                if isinstance(fn, dict):
                    msg.calls.append(
                        make_tool_call(fn.get("name", ""), fn.get("arguments"), tc.get("id"))
                    )
                elif "name" in tc:
                    msg.calls.append(_call(tc, "args" if "args" in tc else "arguments", "id"))
        msg.text = "\n".join(t for t in texts if t) or None
        if len(out) < MAX_MESSAGES:
            out.append(msg)
        return True

    def _block(self, block: Any, side: str, texts: list[str], calls: list[ToolCall]) -> None:
        if isinstance(block, str):
            texts.append(block)
            return
        if not isinstance(block, dict):
            return
        btype = block.get("type")
        if btype in _TEXT_TYPES or (btype is None and isinstance(block.get("text"), str)):
            text = block.get("text", block.get("content"))
            if isinstance(text, str):
                texts.append(text)
        elif btype == "tool_use":  # Anthropic
            calls.append(_call(block, "input", "id"))
        elif btype == "tool_call":  # GenAI semconv part
            calls.append(_call(block, "arguments", "id"))
        elif btype == "tool_result":  # Anthropic
            self.result(side, block.get("tool_use_id"), block.get("content"), _flagged(block))
        elif btype == "tool_call_response":  # GenAI semconv part
            self.result(side, block.get("id"), block.get("response"), _flagged(block))
        elif isinstance(fc := block.get("functionCall", block.get("function_call")), dict):
            calls.append(_call(fc, "args", "id"))  # Gemini
        elif isinstance(fr := block.get("functionResponse", block.get("function_response")), dict):
            self.result(side, fr.get("id"), fr.get("response"), _flagged(fr))


def _structured(obj: dict[str, Any]) -> Any:
    """An MCP tool's structured result as a tool message carries it (langchain-mcp-adapters'
    `artifact.structured_content`, MCP's `structuredContent`), unwrapped from the
    `{"result": value}` that MCP servers put around a non-object return; None if none."""
    artifact = obj.get("artifact")
    found = artifact.get("structured_content") if isinstance(artifact, dict) else None
    if found is None:
        found = obj.get("structuredContent")
    if isinstance(found, dict) and found.keys() == {"result"}:
        return found["result"]
    return found


def _call(obj: dict[str, Any], args_key: str, id_key: str) -> ToolCall:
    return make_tool_call(obj.get("name", ""), obj.get(args_key), obj.get(id_key))


def error_flag(obj: Any) -> bool:
    """Whether a tool result object flags itself as failed: MCP `isError` / Anthropic
    `is_error` true, a LangChain tool message's `status: "error"`."""
    if not isinstance(obj, dict):
        return False
    return obj.get("isError") is True or obj.get("is_error") is True or obj.get("status") == "error"


_flagged = error_flag


def _plain_content(value: Any) -> Any:
    """A result's content as the value it carries: text blocks joined, an MCP result's
    text, JSON text decoded."""
    if (
        isinstance(value, dict)
        and "content" in value
        and ("isError" in value or "is_error" in value)
    ):
        structured = _structured(value)
        value = value["content"] if structured is None else structured
    if (
        isinstance(value, list)
        and value
        and all(isinstance(b, dict) and b.get("type") == "text" for b in value)
    ):
        value = content_text(value)
    if isinstance(value, str) and value[:1] in "[{" and len(value) <= MAX_CHARS:
        decoded = loads(value)
        if decoded is not NOT_JSON:
            return decoded
    return value


def _error_text(result: Any) -> str:
    if isinstance(result, str) and result:
        return result
    return "tool reported an error" if result in (None, "", [], {}) else str(result)[:4096]


def side_of(key: str) -> str:
    """The side of an attribute by its key's words (see the module docstring)."""
    lowered = key.lower()
    if any(word in lowered for word in _OUTPUT_WORDS):
        return OUTPUT
    if any(word in lowered for word in _INPUT_WORDS):
        return INPUT
    return BOTH


def _unflatten(items: Iterable[tuple[str, Any]]) -> list[Any]:
    """`[(rest, value)]` of one flattened prefix (`0.role`, `0.tool_calls.1.name`) as the
    list it spells (indexes above `MAX_FLAT_INDEX` dropped)."""
    root: dict[str, Any] = {}
    for rest, value in items:
        node = root
        parts = rest.split(".")
        if len(parts) > 16:
            continue
        for part in parts[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        node[parts[-1]] = value

    def as_list(node: Any, depth: int = 0) -> Any:
        if not isinstance(node, dict) or depth > 16:
            return node
        if node and all(k.isdigit() for k in node):
            indexes = sorted(int(k) for k in node if int(k) <= MAX_FLAT_INDEX)
            return [as_list(node[str(i)], depth + 1) for i in indexes]
        return {k: as_list(v, depth + 1) for k, v in node.items()}

    out = as_list(root)
    return out if isinstance(out, list) else []


def read_values(
    values: Iterable[tuple[str, Any]], reading: ShapeReading | None = None
) -> ShapeReading:
    """Read `(key, value)` pairs (attributes or event bodies): see the module docstring."""
    walk = _Walk()
    reading = reading if reading is not None else ShapeReading()
    flat: dict[str, list[tuple[str, Any]]] = {}
    seen = 0
    for key, value in values:
        if seen >= MAX_ATTRIBUTES or walk.exhausted:
            break
        if isinstance(value, str):
            if len(value) < 2 or value[0] not in "[{":
                match = _FLAT.match(key)
                if match is not None and len(flat) < MAX_ATTRIBUTES:
                    flat.setdefault(match[1], []).append((match[2] + "." + match[3], value))
                continue
            seen += 1
            walk.chars -= len(value)
            if len(value) > MAX_CHARS or walk.chars < 0:
                _unread(reading, key)
                continue
            decoded = loads(value)
            if decoded is NOT_JSON:
                if len(value) > 64:
                    _unread(reading, key)
                continue
        elif isinstance(value, dict | list):
            seen += 1
            decoded = value
        else:
            match = _FLAT.match(key)
            if match is not None and len(flat) < MAX_ATTRIBUTES:
                flat.setdefault(match[1], []).append((match[2] + "." + match[3], value))
            continue
        walk.walk(decoded, side_of(key))
        if walk.exhausted:
            _unread(reading, key)
    for prefix, items in flat.items():
        if walk.exhausted:
            break
        if len(items) > MAX_FLAT_INDEX * 8:
            _unread(reading, prefix)
            continue
        walk.walk(_unflatten(items), side_of(prefix))
    _conclude(walk, reading)
    return reading


def read_shape(attrs: dict[str, Any]) -> ShapeReading:
    """`read_values` over a span's attributes."""
    return read_values(attrs.items())


def _unread(reading: ShapeReading, key: str) -> None:
    if len(reading.unread) < MAX_UNREAD and key not in reading.unread:
        reading.unread.append(key)


def _last(messages: list[_Msg], role: str) -> _Msg | None:
    """The last message of `role` that has text (a user message carrying only tool
    results, as Anthropic sends them, is not the query)."""
    for msg in reversed(messages):
        if msg.role == role and msg.text:
            return msg
    return None


def _conclude(walk: _Walk, reading: ShapeReading) -> None:
    inputs, outputs, both = walk.messages[INPUT], walk.messages[OUTPUT], walk.messages[BOTH]
    user = _last(inputs, _USER) or _last(both, _USER)
    if reading.query is None and user is not None and user.text:
        reading.query = user.text
    answer_side = outputs
    if not any(m.role == _ASSISTANT for m in outputs) and both:
        # a whole conversation: its answer is what follows the last user message
        last_user = max((i for i, m in enumerate(both) if m.role == _USER), default=-1)
        answer_side = both[last_user + 1 :]
    assistants = [m for m in answer_side if m.role in (_ASSISTANT, "")]
    if reading.answer is None:
        reading.answer = next((m.text for m in reversed(assistants) if m.text), None)
    if not reading.tool_calls:
        calls: list[ToolCall] = []
        last_answer = assistants[-1] if assistants else None
        # requested calls: those of the output's last step (earlier ones were answered)
        for msg in assistants:
            if msg.calls and (msg is last_answer or answer_side is outputs):
                calls.extend(msg.calls)
        reading.tool_calls = tuple(calls)
    reading.tool_results.update(walk.results)
    reading.tool_errors.update(walk.errors)
    own = walk.own.get(OUTPUT) or walk.own.get(BOTH)
    if reading.own_result is None and own is not None:
        reading.own_result = own
    reading.found = bool(
        reading.query
        or reading.answer
        or reading.tool_calls
        or reading.tool_results
        or reading.own_result is not None
    )
