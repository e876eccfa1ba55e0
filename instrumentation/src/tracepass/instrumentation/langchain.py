"""LangChain / LangGraph callback handler emitting tracepass's agent and tool spans.

Pass it in `config={"callbacks": [TracepassCallbackHandler()]}`. A run with no parent
run (the graph or chain you invoked) becomes an `invoke_agent` span; every tool run
becomes an `execute_tool` child of it, with the same attributes as `@agent`/`@tool`.

Callbacks are separate calls for start and end, so the span is never attached as the
current context (that would leak across callbacks and trip context-detach errors);
tool spans are parented explicitly through the run-id tree instead.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from typing import Any
from uuid import UUID

try:
    from langchain_core.callbacks import BaseCallbackHandler
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "tracepass.instrumentation.langchain needs langchain-core: "
        "pip install 'tracepass-instrumentation[langchain]'"
    ) from exc

from opentelemetry import context as otel_context

from tracepass.instrumentation import _content
from tracepass.instrumentation._decorators import (
    _Call,
    _fail,
    finish_agent_call,
    finish_tool_call,
    start_agent_call,
    start_tool_call,
    tool_static_attributes,
)

__all__ = ["TracepassCallbackHandler"]


def _content_text(content: Any) -> str | None:
    """Message content is a str or a list of content blocks; keep the text."""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        texts = []
        for block in content:
            if isinstance(block, str):
                texts.append(block)
            elif isinstance(block, Mapping) and block.get("type") == "text":
                texts.append(str(block.get("text", "")))
        return "".join(texts)
    return None


def _role_and_content(message: Any) -> tuple[str | None, Any]:
    if isinstance(message, Mapping):
        return message.get("role") or message.get("type"), message.get("content")
    if isinstance(message, tuple | list) and len(message) == 2:
        return str(message[0]), message[1]
    return getattr(message, "type", None), getattr(message, "content", None)


def _last_message_text(messages: Any, roles: frozenset[str]) -> str | None:
    if not isinstance(messages, Sequence) or isinstance(messages, str):
        return None
    for message in reversed(messages):
        role, content = _role_and_content(message)
        if role in roles:
            return _content_text(content)
    return None


_USER_ROLES = frozenset({"human", "user"})
_AI_ROLES = frozenset({"ai", "assistant", "AIMessageChunk"})


def extract_query(inputs: Any) -> str | None:
    """The user's query from a root run's input: a str, a dict (`messages` or a text
    key), a bare message list (`chain.invoke([HumanMessage(...)])`) or one message."""
    if isinstance(inputs, str):
        return inputs
    if isinstance(inputs, Mapping):
        if "messages" in inputs:
            return _last_message_text(inputs["messages"], _USER_ROLES)
        for key in ("input", "question", "query"):
            if isinstance(inputs.get(key), str):
                return str(inputs[key])
        return None
    if isinstance(inputs, Sequence):
        return _last_message_text(inputs, _USER_ROLES)
    role, content = _role_and_content(inputs)
    return _content_text(content) if role in _USER_ROLES else None


def extract_answer(outputs: Any) -> str | None:
    """The final answer from a root run's output: the same shapes as `extract_query`,
    looking for the last AI message instead."""
    if isinstance(outputs, str):
        return outputs
    if isinstance(outputs, Mapping):
        if "messages" in outputs:
            return _last_message_text(outputs["messages"], _AI_ROLES)
        for key in ("output", "answer"):
            if isinstance(outputs.get(key), str):
                return str(outputs[key])
        return None
    if isinstance(outputs, Sequence):
        return _last_message_text(outputs, _AI_ROLES)
    role, content = _role_and_content(outputs)
    return _content_text(content) if role in _AI_ROLES else None


def _tool_arguments(input_str: str, inputs: Mapping[str, Any] | None) -> Any:
    if inputs is not None:
        return dict(inputs)
    try:
        parsed = json.loads(input_str)
    except ValueError:
        return {"input": input_str}
    return parsed if isinstance(parsed, dict) else {"input": parsed}


def _tool_result(output: Any) -> Any:
    """A ToolMessage wraps the tool's return value in `.content`, which LangChain has
    already stringified (JSON for dicts/lists): decode structured content back so the
    result is not double-encoded; plain strings stay strings."""
    if getattr(output, "type", None) != "tool" or not hasattr(output, "content"):
        return output
    content = output.content
    if isinstance(content, str) and content[:1] in ("{", "["):
        try:
            return json.loads(content)
        except ValueError:
            return content
    return content


class TracepassCallbackHandler(BaseCallbackHandler):
    """Maps root chain/graph runs to `invoke_agent` and tool runs to `execute_tool`."""

    # Inline: run in the caller's context (conversation contextvar, current span) and in
    # order, instead of LangChain's executor for sync handlers under async runs.
    run_inline = True

    def __init__(self, agent_name: str | None = None, agent_version: str | None = None) -> None:
        super().__init__()
        self.agent_name = agent_name
        self.agent_version = agent_version
        self._lock = threading.Lock()
        self._calls: dict[UUID, _Call] = {}
        self._parents: dict[UUID, UUID | None] = {}
        self._agent_runs: set[UUID] = set()

    # ------------------------------------------------------------------ helpers

    def _span_parent(self, parent_run_id: UUID | None) -> otel_context.Context | None:
        """Context of the nearest ancestor run that has a span; None = current context."""
        with self._lock:
            run = parent_run_id
            seen = 0
            while run is not None and seen < 10_000:
                call = self._calls.get(run)
                if call is not None:
                    return call.ctx
                run = self._parents.get(run)
                seen += 1
        return None

    def _pop(self, run_id: UUID) -> _Call | None:
        with self._lock:
            self._parents.pop(run_id, None)
            self._agent_runs.discard(run_id)
            return self._calls.pop(run_id, None)

    # ------------------------------------------------------------------ chains

    def on_chain_start(
        self,
        serialized: dict[str, Any] | None,
        inputs: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        with self._lock:
            self._parents[run_id] = parent_run_id
        if parent_run_id is not None:
            return
        name = str(
            self.agent_name
            or kwargs.get("name")
            or (serialized or {}).get("name")
            or "langchain_agent"
        )
        call = start_agent_call(
            f"invoke_agent {name}", name, self.agent_version, lambda: extract_query(inputs)
        )
        with self._lock:
            self._calls[run_id] = call
            self._agent_runs.add(run_id)

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        call = self._pop(run_id)
        if call is not None:
            finish_agent_call(call, lambda: extract_answer(outputs))

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        call = self._pop(run_id)
        if call is not None:
            _fail(call, error)

    # ------------------------------------------------------------------ tools

    def on_tool_start(
        self,
        serialized: dict[str, Any] | None,
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        inputs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        settings = _content.SETTINGS
        name = str(kwargs.get("name") or (serialized or {}).get("name") or "tool")
        arguments = _tool_arguments(input_str, inputs) if settings.capture else None
        call = start_tool_call(
            settings,
            f"execute_tool {name}",
            tool_static_attributes(name),
            kwargs.get("tool_call_id") or None,
            arguments,
            parent=self._span_parent(parent_run_id),
        )
        with self._lock:
            self._parents[run_id] = parent_run_id
            self._calls[run_id] = call

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        call = self._pop(run_id)
        if call is not None:
            # A ToolMessage wraps the tool's own return value in `.content`.
            finish_tool_call(call, _tool_result(output) if call.settings.capture else None)

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        call = self._pop(run_id)
        if call is not None:
            _fail(call, error)
