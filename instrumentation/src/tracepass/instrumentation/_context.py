"""Conversations: contextvars state plus the span processor that stamps it on every span.

Stamping happens in a SpanProcessor because the contract is "every span started inside
the block", including spans from LangChain, HTTP clients or any other instrumentation the
application uses. tracepass's own spans (the decorators', the LangChain handler's, the
end marker) also stamp the block's attributes themselves, so they carry them on a
provider the processor was never installed on. contextvars make asyncio tasks spawned
inside the block inherit the conversation automatically.
"""

from __future__ import annotations

import threading
import time
import uuid
import weakref
from contextvars import ContextVar, Token
from types import TracebackType
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.util.types import AttributeValue

from tracepass.instrumentation import semconv as sc
from tracepass.instrumentation._tracer import get_tracer


class ConversationState:
    """Shared by every task that inherits the block; only the turn counter mutates."""

    __slots__ = ("_lock", "agent_version", "attributes", "id", "reference_id", "turns")

    def __init__(self, conv_id: str, reference_id: str | None, agent_version: str | None):
        self.id = conv_id
        self.reference_id = reference_id
        self.agent_version = agent_version
        self.turns = 0
        self._lock = threading.Lock()
        attrs: dict[str, AttributeValue] = {sc.CONVERSATION_ID: conv_id}
        if reference_id is not None:
            attrs[sc.REFERENCE_ID] = reference_id
        if agent_version is not None:
            attrs[sc.TRACEPASS_AGENT_VERSION] = agent_version
        # Precomputed once: the processor applies it to every span with one call.
        self.attributes = attrs

    def count_turn(self) -> None:
        with self._lock:
            self.turns += 1


CURRENT: ContextVar[ConversationState | None] = ContextVar("tracepass_conversation", default=None)

# Set in the OTel context while an @agent (or LangChain root run) body runs, so a nested
# agent knows it is a sub-agent and does not count as a conversation turn.
IN_AGENT_KEY = otel_context.create_key("tracepass-in-agent")


def current_conversation_id() -> str | None:
    """The id of the innermost active `conversation` block, or None outside one."""
    state = CURRENT.get()
    return None if state is None else state.id


def current_reference_id() -> str | None:
    state = CURRENT.get()
    return None if state is None else state.reference_id


class conversation:  # lowercase: used like a function, `with conversation(...)`
    """One multi-turn conversation; sync (`with`) and async (`async with`) context manager.

    Leaving the block emits the end marker span, even when the block raised: the
    conversation is over either way and the collector should not wait for more turns.
    """

    def __init__(
        self,
        id: str | None = None,  # shadows the builtin: the contract's parameter name
        *,
        reference_id: str | None = None,
        agent_version: str | None = None,
    ) -> None:
        if id is not None and not isinstance(id, str):
            raise TypeError(f"conversation id must be a str, got {type(id).__qualname__}")
        if id == "":
            raise ValueError("conversation id must not be empty")
        self.id: str = id if id is not None else uuid.uuid4().hex
        self.reference_id = reference_id
        self.agent_version = agent_version
        self._state: ConversationState | None = None
        self._token: Token[ConversationState | None] | None = None

    @property
    def turns(self) -> int:
        """Top-level agent turns started inside the block so far."""
        return 0 if self._state is None else self._state.turns

    def __enter__(self) -> conversation:
        if self._token is not None:
            raise RuntimeError(f"conversation {self.id!r} is already active")
        self._state = ConversationState(self.id, self.reference_id, self.agent_version)
        self._token = CURRENT.set(self._state)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        token, state = self._token, self._state
        if token is None or state is None:
            raise RuntimeError(f"conversation {self.id!r} exited without being entered")
        try:
            _emit_end_marker(state)
        finally:
            self._token = None
            CURRENT.reset(token)

    async def __aenter__(self) -> conversation:
        return self.__enter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.__exit__(exc_type, exc, tb)


def _emit_end_marker(state: ConversationState) -> None:
    """A zero-duration span: cheap, travels the same pipeline as the turns it closes."""
    attrs = dict(state.attributes)  # stamped by itself, like the decorators' spans
    attrs[sc.CONVERSATION_END] = True
    attrs[sc.CONVERSATION_TURNS] = state.turns
    now = time.time_ns()
    span = get_tracer().start_span(
        sc.CONVERSATION_END_SPAN,
        kind=trace.SpanKind.INTERNAL,
        attributes=attrs,
        start_time=now,
    )
    span.end(end_time=now)


class ConversationSpanProcessor(SpanProcessor):
    """Stamps the active conversation's attributes on every span at start."""

    def on_start(self, span: Span, parent_context: otel_context.Context | None = None) -> None:
        state = CURRENT.get()
        if state is not None:
            span.set_attributes(state.attributes)

    def on_end(self, span: ReadableSpan) -> None:
        pass

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


_installed: weakref.WeakKeyDictionary[TracerProvider, ConversationSpanProcessor] = (
    weakref.WeakKeyDictionary()
)
_install_lock = threading.Lock()


def install(tracer_provider: TracerProvider | None = None) -> ConversationSpanProcessor:
    """Add the conversation processor to an SDK provider (the global one by default).

    Idempotent per provider, so libraries and `configure` can all call it safely.
    """
    provider: Any = tracer_provider if tracer_provider is not None else trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        raise TypeError(
            "tracepass needs an opentelemetry-sdk TracerProvider to stamp conversation ids; "
            f"got {type(provider).__module__}.{type(provider).__qualname__}. "
            "Call tracepass.instrumentation.configure() or set an SDK provider first."
        )
    with _install_lock:
        processor = _installed.get(provider)
        if processor is None:
            processor = ConversationSpanProcessor()
            provider.add_span_processor(processor)
            _installed[provider] = processor
        return processor


def is_installed(tracer_provider: TracerProvider) -> bool:
    return tracer_provider in _installed
