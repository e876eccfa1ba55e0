"""@agent / @tool span shapes on every kind of callable, against the real SDK."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Iterator

import pytest
from _instr_support import attr_json, by_name, one
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from tracepass.instrumentation import agent, conversation, tool


class LookupError_(Exception):
    pass


@tool
def get_weather(city: str, unit: str = "C") -> dict[str, object]:
    return {"city": city, "temp": 21, "unit": unit}


@tool(name="search_docs")
async def search(query: str, *, limit: int = 3) -> list[str]:
    await asyncio.sleep(0)
    return [f"{query}-{i}" for i in range(limit)]


@tool
def failing_lookup(key: str) -> str:
    raise LookupError_(f"no such key: {key}")


@agent(name="weather-bot", version="1.2.0")
def weather_agent(question: str) -> str:
    data = get_weather("Paris", unit="F")
    return f"It is {data['temp']} in {data['city']}"


def test_tool_span_name_kind_and_attributes(spans: InMemorySpanExporter) -> None:
    assert get_weather("Oslo", tool_call_id="call_42") == {"city": "Oslo", "temp": 21, "unit": "C"}
    span = one(spans.get_finished_spans(), "execute_tool get_weather")
    assert span.kind is SpanKind.INTERNAL
    assert span.status.status_code is StatusCode.UNSET
    attrs = dict(span.attributes or {})
    assert attrs == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "get_weather",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.call.id": "call_42",
        "gen_ai.tool.call.arguments": '{"city": "Oslo"}',
        "gen_ai.tool.call.result": '{"city": "Oslo", "temp": 21, "unit": "C"}',
        # the JSON Schema of the parameters (from the signature), for `arguments_schema`
        "tracepass.tool.parameters_schema": (
            '{"type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string"}},'
            '"required":["city"],"additionalProperties":false}'
        ),
    }


def test_tool_call_id_generated_and_unique(spans: InMemorySpanExporter) -> None:
    for _ in range(50):
        get_weather("Rome")
    ids = {s.attributes["gen_ai.tool.call.id"] for s in spans.get_finished_spans() if s.attributes}
    assert len(ids) == 50
    assert all(isinstance(i, str) and i.startswith("call_") for i in ids)


def test_tool_that_declares_tool_call_id_receives_it(spans: InMemorySpanExporter) -> None:
    @tool
    def echo(text: str, tool_call_id: str | None = None) -> str:
        return f"{text}:{tool_call_id}"

    assert echo("hi", tool_call_id="c1") == "hi:c1"
    span = one(spans.get_finished_spans(), "execute_tool echo")
    assert span.attributes is not None
    assert span.attributes["gen_ai.tool.call.id"] == "c1"
    # The id is the call's identity, not an argument the model chose.
    assert attr_json(span, "gen_ai.tool.call.arguments") == {"text": "hi"}


async def test_async_tool_with_name_override(spans: InMemorySpanExporter) -> None:
    assert await search("otel", limit=2) == ["otel-0", "otel-1"]
    span = one(spans.get_finished_spans(), "execute_tool search_docs")
    assert span.attributes is not None
    assert span.attributes["gen_ai.tool.name"] == "search_docs"
    assert attr_json(span, "gen_ai.tool.call.arguments") == {"query": "otel", "limit": 2}
    assert attr_json(span, "gen_ai.tool.call.result") == ["otel-0", "otel-1"]


def test_tool_exception_recorded_and_reraised_unchanged(spans: InMemorySpanExporter) -> None:
    with pytest.raises(LookupError_) as info:
        failing_lookup("k1")
    assert str(info.value) == "no such key: k1"
    span = one(spans.get_finished_spans(), "execute_tool failing_lookup")
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "no such key: k1"
    assert span.attributes is not None
    assert span.attributes["error.type"] == f"{__name__}.LookupError_"
    assert "gen_ai.tool.call.result" not in span.attributes
    events = [e for e in span.events if e.name == "exception"]
    assert len(events) == 1
    assert events[0].attributes is not None
    assert events[0].attributes["exception.message"] == "no such key: k1"


async def test_exception_object_reraised_is_the_one_raised(spans: InMemorySpanExporter) -> None:
    original = LookupError_("same object")

    @tool
    def sync_raiser() -> None:
        raise original

    @agent
    async def async_raiser(q: str) -> None:
        raise original

    with pytest.raises(LookupError_) as sync_info:
        sync_raiser()
    with pytest.raises(LookupError_) as async_info:
        await async_raiser("q")
    assert sync_info.value is original
    assert async_info.value is original
    assert len(spans.get_finished_spans()) == 2


def test_builtin_exception_type_is_bare_name(spans: InMemorySpanExporter) -> None:
    @tool
    def divide(a: int, b: int) -> float:
        return a / b

    with pytest.raises(ZeroDivisionError):
        divide(1, 0)
    span = one(spans.get_finished_spans(), "execute_tool divide")
    assert span.attributes is not None
    assert span.attributes["error.type"] == "ZeroDivisionError"


def test_agent_span_with_child_tool(spans: InMemorySpanExporter) -> None:
    assert weather_agent("Weather in Paris?") == "It is 21 in Paris"
    finished = spans.get_finished_spans()
    turn = one(finished, "invoke_agent weather-bot")
    call = one(finished, "execute_tool get_weather")
    assert turn.kind is SpanKind.INTERNAL
    assert turn.parent is None
    assert call.parent is not None
    assert turn.context is not None
    assert call.parent.span_id == turn.context.span_id
    assert call.context is not None
    assert call.context.trace_id == turn.context.trace_id
    attrs = dict(turn.attributes or {})
    assert attrs["gen_ai.operation.name"] == "invoke_agent"
    assert attrs["gen_ai.agent.name"] == "weather-bot"
    assert attrs["gen_ai.agent.version"] == "1.2.0"
    assert "gen_ai.conversation.id" not in attrs  # not inside a conversation
    assert attrs["gen_ai.input.messages"] == json.dumps(
        [{"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]}]
    )
    assert json.loads(str(attrs["gen_ai.output.messages"])) == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "It is 21 in Paris"}],
            "finish_reason": "stop",
        }
    ]


def test_agent_extractors(spans: InMemorySpanExporter) -> None:
    class Request:
        def __init__(self, text: str) -> None:
            self.text = text

    @agent(query=lambda req: req.text, answer=lambda out: out["answer"])
    def structured(req: Request) -> dict[str, str]:
        return {"answer": "42", "debug": "x"}

    structured(Request("meaning of life?"))
    span = one(spans.get_finished_spans(), "invoke_agent structured")
    assert attr_json(span, "gen_ai.input.messages")[0]["parts"][0]["content"] == "meaning of life?"
    assert attr_json(span, "gen_ai.output.messages")[0]["parts"][0]["content"] == "42"


def test_agent_without_str_argument_has_no_input(spans: InMemorySpanExporter) -> None:
    @agent
    def numeric(x: int) -> int:
        return x * 2

    numeric(3)
    span = one(spans.get_finished_spans(), "invoke_agent numeric")
    assert span.attributes is not None
    assert "gen_ai.input.messages" not in span.attributes
    # Non-str answers become JSON text.
    assert attr_json(span, "gen_ai.output.messages")[0]["parts"][0]["content"] == "6"


def test_failing_extractor_never_breaks_the_agent(
    spans: InMemorySpanExporter, caplog: pytest.LogCaptureFixture
) -> None:
    @agent(query=lambda q: q["missing"])
    def bot(q: dict[str, str]) -> str:
        return "ok"

    assert bot({}) == "ok"
    span = one(spans.get_finished_spans(), "invoke_agent bot")
    assert span.attributes is not None
    assert "gen_ai.input.messages" not in span.attributes
    assert "query extractor" in caplog.text


def test_methods_exclude_self_and_cls(spans: InMemorySpanExporter) -> None:
    class Toolbox:
        @tool
        def lookup(self, key: str) -> str:
            return key.upper()

        @classmethod
        @tool
        def make(cls, n: int) -> int:
            return n

        @agent(name="method-agent")
        def run(self, question: str) -> str:
            return self.lookup(question)

    box = Toolbox()
    assert box.run("abc") == "ABC"
    assert Toolbox.make(5) == 5
    finished = spans.get_finished_spans()
    assert attr_json(one(finished, "execute_tool lookup"), "gen_ai.tool.call.arguments") == {
        "key": "abc"
    }
    assert attr_json(one(finished, "execute_tool make"), "gen_ai.tool.call.arguments") == {"n": 5}
    turn = one(finished, "invoke_agent method-agent")
    assert attr_json(turn, "gen_ai.input.messages")[0]["parts"][0]["content"] == "abc"


def test_var_args_and_kwargs_are_bound(spans: InMemorySpanExporter) -> None:
    @tool
    def flexible(a: int, *rest: int, scale: int = 1, **options: str) -> int:
        return (a + sum(rest)) * scale

    assert flexible(1, 2, 3, scale=2, mode="fast") == 12
    span = one(spans.get_finished_spans(), "execute_tool flexible")
    assert attr_json(span, "gen_ai.tool.call.arguments") == {
        "a": 1,
        "rest": [2, 3],
        "scale": 2,
        "mode": "fast",
    }


def test_nested_agents_are_child_invoke_agent_spans(spans: InMemorySpanExporter) -> None:
    @agent(name="researcher")
    def researcher(topic: str) -> str:
        return get_weather(topic)["city"]  # type: ignore[return-value]

    @agent(name="planner")
    def planner(goal: str) -> str:
        return "plan: " + researcher(goal)

    with conversation() as conv:
        planner("Lima")
    finished = spans.get_finished_spans()
    outer = one(finished, "invoke_agent planner")
    inner = one(finished, "invoke_agent researcher")
    leaf = one(finished, "execute_tool get_weather")
    assert outer.context is not None
    assert inner.context is not None
    assert inner.parent is not None
    assert inner.parent.span_id == outer.context.span_id
    assert leaf.parent is not None
    assert leaf.parent.span_id == inner.context.span_id
    end = one(finished, "tracepass.conversation.end")
    assert end.attributes is not None
    assert end.attributes["tracepass.conversation.turns"] == 1  # the sub-agent is no turn
    assert conv.turns == 1


# --------------------------------------------------------------------------- generators


@tool
def count_up(n: int) -> Iterator[int]:
    yield from range(n)


@agent(name="streamer")
def stream_answer(question: str) -> Iterator[str]:
    yield "Hel"
    get_weather("Kyiv")
    yield "lo"


@agent(name="astreamer")
async def astream_answer(question: str) -> AsyncIterator[str]:
    for chunk in ("a", "b", "c"):
        await asyncio.sleep(0)
        await search(chunk, limit=1)
        yield chunk


def test_generator_span_covers_iteration(spans: InMemorySpanExporter) -> None:
    gen = stream_answer("hi?")
    assert spans.get_finished_spans() == ()  # nothing starts before iteration
    assert list(gen) == ["Hel", "lo"]
    finished = spans.get_finished_spans()
    turn = one(finished, "invoke_agent streamer")
    child = one(finished, "execute_tool get_weather")
    assert turn.context is not None
    assert child.parent is not None
    assert child.parent.span_id == turn.context.span_id
    assert attr_json(turn, "gen_ai.output.messages")[0]["parts"][0]["content"] == "Hello"
    assert turn.start_time is not None
    assert child.end_time is not None
    assert turn.end_time is not None
    assert turn.start_time <= child.start_time  # type: ignore[operator]
    assert child.end_time <= turn.end_time


def test_tool_generator_result_is_yielded_items(spans: InMemorySpanExporter) -> None:
    assert list(count_up(3)) == [0, 1, 2]
    span = one(spans.get_finished_spans(), "execute_tool count_up")
    assert attr_json(span, "gen_ai.tool.call.result") == [0, 1, 2]


def test_generator_early_break_no_detach_errors(
    spans: InMemorySpanExporter, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    for item in count_up(100):
        if item == 2:
            break
    gen = stream_answer("q")
    next(gen)
    gen.close()
    finished = spans.get_finished_spans()
    counted = one(finished, "execute_tool count_up")
    assert attr_json(counted, "gen_ai.tool.call.result") == [0, 1, 2]
    turn = one(finished, "invoke_agent streamer")
    assert turn.status.status_code is StatusCode.UNSET
    assert attr_json(turn, "gen_ai.output.messages")[0]["parts"][0]["content"] == "Hel"
    assert "Failed to detach context" not in caplog.text


def test_generator_exception_propagates(spans: InMemorySpanExporter) -> None:
    @tool
    def broken() -> Iterator[int]:
        yield 1
        raise RuntimeError("stream broke")

    with pytest.raises(RuntimeError, match="stream broke"):
        list(broken())
    span = one(spans.get_finished_spans(), "execute_tool broken")
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes is not None
    assert span.attributes["error.type"] == "RuntimeError"


def test_generator_send_and_throw_are_forwarded(spans: InMemorySpanExporter) -> None:
    @tool
    def accumulator() -> Iterator[int]:
        total = 0
        while True:
            try:
                got = yield total
            except ValueError:
                got = -100
            total += got or 0

    gen = accumulator()
    assert next(gen) == 0
    assert gen.send(5) == 5
    assert gen.throw(ValueError("x")) == -95
    gen.close()
    assert by_name(spans.get_finished_spans(), "execute_tool accumulator")


async def test_async_generator_full_and_children(spans: InMemorySpanExporter) -> None:
    chunks = [c async for c in astream_answer("q")]
    assert chunks == ["a", "b", "c"]
    finished = spans.get_finished_spans()
    turn = one(finished, "invoke_agent astreamer")
    assert turn.context is not None
    children = by_name(finished, "execute_tool search_docs")
    assert len(children) == 3
    assert all(c.parent is not None and c.parent.span_id == turn.context.span_id for c in children)
    assert attr_json(turn, "gen_ai.output.messages")[0]["parts"][0]["content"] == "abc"


async def test_async_generator_early_break_and_aclose(
    spans: InMemorySpanExporter, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    agen = astream_answer("q")
    async for chunk in agen:
        if chunk == "b":
            break
    await agen.aclose()  # type: ignore[attr-defined]

    # Closed from a different task than the one that iterated it.
    other = astream_answer("q2")
    assert await other.__anext__() == "a"
    await asyncio.create_task(other.aclose())  # type: ignore[attr-defined]

    finished = by_name(spans.get_finished_spans(), "invoke_agent astreamer")
    assert len(finished) == 2
    contents = sorted(
        attr_json(s, "gen_ai.output.messages")[0]["parts"][0]["content"] for s in finished
    )
    assert contents == ["a", "ab"]
    assert all(s.status.status_code is StatusCode.UNSET for s in finished)
    assert "Failed to detach context" not in caplog.text


async def test_async_agent_cancelled_is_error(spans: InMemorySpanExporter) -> None:
    started = asyncio.Event()

    @agent
    async def slow(q: str) -> str:
        started.set()
        await asyncio.sleep(30)
        return "never"

    task = asyncio.create_task(slow("q"))
    await asyncio.wait_for(started.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    span = one(spans.get_finished_spans(), "invoke_agent slow")
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes is not None
    assert span.attributes["error.type"] == "asyncio.exceptions.CancelledError"


def test_decorated_function_keeps_metadata() -> None:
    assert get_weather.__name__ == "get_weather"
    assert weather_agent.__wrapped__.__name__ == "weather_agent"  # type: ignore[attr-defined]
    assert asyncio.iscoroutinefunction(search)


@pytest.mark.parametrize(("decorator", "label"), [(tool, "tool"), (agent, "agent")])
def test_positional_name_is_a_precise_error(decorator: object, label: str) -> None:
    with pytest.raises(TypeError, match=rf"@{label} decorates a function; got str 'x'.*name="):
        decorator("x")  # type: ignore[operator]
