"""`@agent` and `@tool`: one span per agent turn / tool call, on any kind of callable.

Context handling is the subtle part. The span's context is attached only while the
wrapped code runs (per call, or per generator step) and detached before control returns
to the caller. Keeping it attached across a generator's `yield` would detach it later in
whatever context closes the generator (another task, the GC), which is exactly what makes
OpenTelemetry log "Failed to detach context".
"""

from __future__ import annotations

import functools
import inspect
import logging
import os
from collections.abc import AsyncGenerator, Callable, Generator
from typing import Any, TypeVar, overload

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from tracepass.instrumentation import _content
from tracepass.instrumentation import semconv as sc
from tracepass.instrumentation._binding import TOOL_CALL_ID_KWARG, ArgumentBinder
from tracepass.instrumentation._context import CURRENT, IN_AGENT_KEY
from tracepass.instrumentation._schema import parameters_schema_json
from tracepass.instrumentation._tracer import get_tracer

_log = logging.getLogger("tracepass.instrumentation")

F = TypeVar("F", bound=Callable[..., Any])

_attach = otel_context.attach
_detach = otel_context.detach
_set_span_in_context = trace.set_span_in_context
_INTERNAL = SpanKind.INTERNAL


def new_tool_call_id() -> str:
    # os.urandom: unique across forked workers (a seeded PRNG is not) and cheaper than uuid4.
    return "call_" + os.urandom(12).hex()


def qualified_name(cls: type) -> str:
    module = cls.__module__
    if module == "builtins":
        return cls.__qualname__
    return f"{module}.{cls.__qualname__}"


class _Call:
    """State of one in-flight span between begin and end."""

    __slots__ = ("ctx", "settings", "span", "truncated")

    def __init__(
        self,
        span: trace.Span,
        ctx: otel_context.Context,
        settings: _content.ContentSettings,
        truncated: list[str] | None,
    ) -> None:
        self.span = span
        self.ctx = ctx
        self.settings = settings
        self.truncated = truncated


def _fail(call: _Call, exc: BaseException) -> None:
    span = call.span
    try:
        span.record_exception(exc)
        span.set_status(Status(StatusCode.ERROR, str(exc) or type(exc).__qualname__))
        span.set_attribute(sc.ERROR_TYPE, qualified_name(type(exc)))
        if call.truncated:
            span.set_attribute(sc.CONTENT_TRUNCATED, call.truncated)
    finally:
        span.end()


class _Spec:
    """What a decorated function's spans look like; subclasses say how to fill them."""

    __slots__ = ()

    def begin(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> _Call:
        raise NotImplementedError

    def succeed(self, call: _Call, result: Any) -> None:
        raise NotImplementedError

    def stream_result(self, items: list[Any]) -> Any:
        """The 'return value' of a generator: what it yielded."""
        return items


def start_tool_call(
    settings: _content.ContentSettings,
    span_name: str,
    static: dict[str, AttributeValue],
    call_id: Any,
    arguments: Any,
    parent: otel_context.Context | None = None,
) -> _Call:
    """Start an `execute_tool` span; shared by `@tool` and the LangChain handler so both
    emit exactly the same attributes. `arguments` is only read when capture is on."""
    attrs = static.copy()
    attrs[sc.TOOL_CALL_ID] = new_tool_call_id() if call_id is None else str(call_id)
    state = CURRENT.get()
    if state is not None:
        # Stamped here, not only by the processor, so the span carries the conversation
        # and reference ids even on a provider the processor was never installed on.
        attrs.update(state.attributes)
    truncated = None
    if settings.capture:
        attrs[sc.TOOL_CALL_ARGUMENTS], truncated = _content.capture_json(
            settings, sc.TOOL_CALL_ARGUMENTS, arguments, None
        )
    span = get_tracer().start_span(span_name, context=parent, kind=_INTERNAL, attributes=attrs)
    return _Call(span, _set_span_in_context(span), settings, truncated)


def finish_tool_call(call: _Call, result: Any) -> None:
    span = call.span
    try:
        settings = call.settings
        if settings.capture:
            value, truncated = _content.capture_json(
                settings, sc.TOOL_CALL_RESULT, result, call.truncated
            )
            span.set_attribute(sc.TOOL_CALL_RESULT, value)
            if truncated:
                span.set_attribute(sc.CONTENT_TRUNCATED, truncated)
    finally:
        span.end()


def tool_static_attributes(name: str) -> dict[str, AttributeValue]:
    return {
        sc.OPERATION_NAME: sc.OP_EXECUTE_TOOL,
        sc.TOOL_NAME: name,
        sc.TOOL_TYPE: "function",
    }


class _ToolSpec(_Spec):
    __slots__ = ("binder", "name", "span_name", "static")

    def __init__(self, fn: Callable[..., Any], name: str) -> None:
        self.name = name
        self.span_name = f"execute_tool {name}"
        self.binder = ArgumentBinder(fn)
        self.static = tool_static_attributes(name)
        schema = parameters_schema_json(fn)
        if schema is not None:
            self.static[sc.TOOL_PARAMETERS_SCHEMA] = schema

    def begin(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> _Call:
        settings = _content.SETTINGS
        call_id: Any = None
        if TOOL_CALL_ID_KWARG in kwargs:
            if self.binder.accepts_call_id:
                call_id = kwargs[TOOL_CALL_ID_KWARG]
            else:  # consumed here: the function does not take it
                call_id = kwargs.pop(TOOL_CALL_ID_KWARG)
        arguments = self.binder.bind(args, kwargs) if settings.capture else None
        return start_tool_call(settings, self.span_name, self.static, call_id, arguments)

    def succeed(self, call: _Call, result: Any) -> None:
        finish_tool_call(call, result)


def start_agent_call(
    span_name: str,
    name: str,
    version: str | None,
    extract_query: Callable[[], Any],
) -> _Call:
    """Start an `invoke_agent` span and make it the 'inside an agent' context; shared by
    `@agent` and the LangChain handler. `extract_query` runs only when capture is on."""
    settings = _content.SETTINGS
    state = CURRENT.get()
    attrs: dict[str, AttributeValue] = {
        sc.OPERATION_NAME: sc.OP_INVOKE_AGENT,
        sc.AGENT_NAME: name,
    }
    if version is None and state is not None:
        version = state.agent_version
    if version is not None:
        attrs[sc.AGENT_VERSION] = version
    if state is not None:
        attrs.update(state.attributes)  # as in `start_tool_call`
        if not otel_context.get_value(IN_AGENT_KEY):
            state.count_turn()
    truncated = None
    if settings.capture:
        query = extract_query()
        if query is not None:
            attrs[sc.INPUT_MESSAGES], truncated = _content.capture_message(
                settings, sc.INPUT_MESSAGES, "user", query, None
            )
    span = get_tracer().start_span(span_name, kind=_INTERNAL, attributes=attrs)
    ctx = otel_context.set_value(IN_AGENT_KEY, True, _set_span_in_context(span))
    return _Call(span, ctx, settings, truncated)


def finish_agent_call(call: _Call, extract_answer: Callable[[], Any]) -> None:
    """End an `invoke_agent` span; `extract_answer` runs only when capture is on."""
    span = call.span
    try:
        settings = call.settings
        if not settings.capture:
            return
        answer = extract_answer()
        truncated = call.truncated
        if answer is not None:
            value, truncated = _content.capture_message(
                settings, sc.OUTPUT_MESSAGES, "assistant", answer, truncated, "stop"
            )
            span.set_attribute(sc.OUTPUT_MESSAGES, value)
        if truncated:
            span.set_attribute(sc.CONTENT_TRUNCATED, truncated)
    finally:
        span.end()


class _AgentSpec(_Spec):
    __slots__ = ("answer", "name", "query", "span_name", "version")

    def __init__(
        self,
        name: str,
        version: str | None,
        query: Callable[..., Any] | None,
        answer: Callable[[Any], Any] | None,
    ) -> None:
        self.name = name
        self.version = version
        self.span_name = f"invoke_agent {name}"
        self.query = query
        self.answer = answer

    def _extract_query(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if self.query is not None:
            try:
                return self.query(*args, **kwargs)
            except Exception:
                _log.exception("tracepass query extractor of agent %r failed", self.name)
                return None
        for value in args:
            if type(value) is str:
                return value
        for value in kwargs.values():
            if type(value) is str:
                return value
        return None

    def _extract_answer(self, result: Any) -> Any:
        if self.answer is None:
            return result
        try:
            return self.answer(result)
        except Exception:
            _log.exception("tracepass answer extractor of agent %r failed", self.name)
            return None

    def begin(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> _Call:
        return start_agent_call(
            self.span_name, self.name, self.version, lambda: self._extract_query(args, kwargs)
        )

    def succeed(self, call: _Call, result: Any) -> None:
        finish_agent_call(call, lambda: self._extract_answer(result))

    def stream_result(self, items: list[Any]) -> Any:
        if self.answer is None and all(type(item) is str for item in items):
            return "".join(items)  # a streamed text answer
        return items


# --------------------------------------------------------------------------- wrappers


def _wrap(fn: Callable[..., Any], spec: _Spec) -> Callable[..., Any]:
    if inspect.isasyncgenfunction(fn):
        return _wrap_async_gen(fn, spec)
    if inspect.isgeneratorfunction(fn):
        return _wrap_gen(fn, spec)
    if inspect.iscoroutinefunction(fn):
        return _wrap_async(fn, spec)
    return _wrap_sync(fn, spec)


def _wrap_sync(fn: Callable[..., Any], spec: _Spec) -> Callable[..., Any]:
    begin, succeed = spec.begin, spec.succeed

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        call = begin(args, kwargs)
        token = _attach(call.ctx)
        try:
            result = fn(*args, **kwargs)
        except BaseException as exc:
            _detach(token)
            _fail(call, exc)
            raise
        _detach(token)
        succeed(call, result)
        return result

    return wrapper


def _wrap_async(fn: Callable[..., Any], spec: _Spec) -> Callable[..., Any]:
    begin, succeed = spec.begin, spec.succeed

    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        call = begin(args, kwargs)
        token = _attach(call.ctx)
        try:
            result = await fn(*args, **kwargs)
        except BaseException as exc:
            _detach(token)
            _fail(call, exc)
            raise
        _detach(token)
        succeed(call, result)
        return result

    return wrapper


def _create_generator(
    call: _Call, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """Call a (sync or async) generator function under the span's context: the body runs
    later, one step at a time; a call that raises already fails the span."""
    try:
        token = _attach(call.ctx)
        try:
            return fn(*args, **kwargs)
        finally:
            _detach(token)
    except BaseException as exc:
        _fail(call, exc)
        raise


def _wrap_gen(fn: Callable[..., Any], spec: _Spec) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Generator[Any, Any, Any]:
        call = spec.begin(args, kwargs)
        items: list[Any] | None = [] if call.settings.capture else None
        gen = _create_generator(call, fn, args, kwargs)
        step: Callable[[Any], Any] = gen.send
        arg: Any = None
        while True:
            try:
                token = _attach(call.ctx)
                try:
                    item = step(arg)
                finally:
                    _detach(token)
            except StopIteration as stop:
                spec.succeed(call, spec.stream_result(items or []))
                return stop.value
            except BaseException as exc:
                _fail(call, exc)
                raise
            if items is not None:
                items.append(item)
            try:
                arg = yield item
                step = gen.send
            except GeneratorExit:
                # Early exit (break, close(), GC): close the inner generator under the
                # span's context, record what was produced, and end normally.
                try:
                    token = _attach(call.ctx)
                    try:
                        gen.close()
                    finally:
                        _detach(token)
                except BaseException as exc:
                    _fail(call, exc)
                    raise
                spec.succeed(call, spec.stream_result(items or []))
                raise
            except BaseException as exc:
                step, arg = gen.throw, exc

    return wrapper


def _wrap_async_gen(fn: Callable[..., Any], spec: _Spec) -> Callable[..., Any]:
    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> AsyncGenerator[Any, Any]:
        call = spec.begin(args, kwargs)
        items: list[Any] | None = [] if call.settings.capture else None
        agen = _create_generator(call, fn, args, kwargs)
        step: Callable[[Any], Any] = agen.asend
        arg: Any = None
        while True:
            try:
                token = _attach(call.ctx)
                try:
                    item = await step(arg)
                finally:
                    _detach(token)
            except StopAsyncIteration:
                spec.succeed(call, spec.stream_result(items or []))
                return
            except BaseException as exc:
                _fail(call, exc)
                raise
            if items is not None:
                items.append(item)
            try:
                arg = yield item
                step = agen.asend
            except GeneratorExit:
                try:
                    token = _attach(call.ctx)
                    try:
                        await agen.aclose()
                    finally:
                        _detach(token)
                except BaseException as exc:
                    _fail(call, exc)
                    raise
                spec.succeed(call, spec.stream_result(items or []))
                raise
            except BaseException as exc:
                step, arg = agen.athrow, exc

    return wrapper


# --------------------------------------------------------------------------- public


def _check_target(decorator: str, fn: Any) -> None:
    """`@tool("search")` is a natural slip; without this it fails as an obscure
    AttributeError at import time of the user's module."""
    if not callable(fn):
        raise TypeError(
            f"@{decorator} decorates a function; got {type(fn).__qualname__} {fn!r}. "
            f"Pass the name as a keyword: @{decorator}(name=...)"
        )


@overload
def agent(fn: F, /) -> F: ...
@overload
def agent(
    fn: None = None,
    /,
    *,
    name: str | None = None,
    version: str | None = None,
    query: Callable[..., Any] | None = None,
    answer: Callable[[Any], Any] | None = None,
) -> Callable[[F], F]: ...
def agent(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    version: str | None = None,
    query: Callable[..., Any] | None = None,
    answer: Callable[[Any], Any] | None = None,
) -> Any:
    """Trace each call as one agent turn (`invoke_agent {name}` span).

    `query(*args, **kwargs)` extracts the user query (default: first `str` argument);
    `answer(result)` extracts the final answer (default: the return value, or for
    generators the concatenated `str` chunks). `version` defaults to the enclosing
    conversation's `agent_version`.
    """

    def decorate(func: F) -> F:
        _check_target("agent", func)
        spec = _AgentSpec(name or func.__name__, version, query, answer)
        return _wrap(func, spec)  # type: ignore[return-value]

    return decorate(fn) if fn is not None else decorate


@overload
def tool(fn: F, /) -> F: ...
@overload
def tool(fn: None = None, /, *, name: str | None = None) -> Callable[[F], F]: ...
def tool(fn: Callable[..., Any] | None = None, /, *, name: str | None = None) -> Any:
    """Trace each call as one tool execution (`execute_tool {name}` span).

    A `tool_call_id=` keyword sets `gen_ai.tool.call.id` (and is consumed unless the
    function declares it); otherwise an id is generated.
    """

    def decorate(func: F) -> F:
        _check_target("tool", func)
        spec = _ToolSpec(func, name or func.__name__)
        return _wrap(func, spec)  # type: ignore[return-value]

    return decorate(fn) if fn is not None else decorate
