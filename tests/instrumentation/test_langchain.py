"""The LangChain handler driving a real LangGraph tool-calling loop (only the LLM is fake)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import pytest
from _instr_support import attr_json, by_name, one
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.tools import tool as lc_tool
from langgraph.prebuilt import ToolNode, create_react_agent
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from tracepass.instrumentation import agent, conversation
from tracepass.instrumentation.langchain import (
    TracepassCallbackHandler,
    extract_answer,
    extract_query,
)

# create_react_agent moved to the `langchain` package, which tracepass does not depend on.
pytestmark = pytest.mark.filterwarnings("ignore:create_react_agent has been moved")


class ScriptedChatModel(BaseChatModel):
    """Replays AIMessages (tool calls, then a final answer); `bind_tools` is accepted so a
    real agent loop can drive it."""

    script: list[AIMessage]
    cursor: Any = None

    def model_post_init(self, __context: Any) -> None:
        self.cursor = itertools.cycle(self.script)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=next(self.cursor))])

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:  # type: ignore[override]
        return self


@lc_tool
def get_weather(city: str) -> dict[str, Any]:
    """Current weather for a city."""
    return {"city": city, "temp_c": 18}


@lc_tool
def convert(celsius: float) -> float:
    """Celsius to Fahrenheit."""
    return celsius * 9 / 5 + 32


@lc_tool
def explode(reason: str) -> str:
    """Always fails."""
    raise ValueError(f"exploded: {reason}")


def _script() -> list[AIMessage]:
    return [
        AIMessage(
            content="",
            tool_calls=[
                {"name": "get_weather", "args": {"city": "Paris"}, "id": "call_w1"},
            ],
        ),
        AIMessage(
            content="",
            tool_calls=[{"name": "convert", "args": {"celsius": 18}, "id": "call_c1"}],
        ),
        AIMessage(content="It is 64.4F in Paris."),
    ]


def test_react_agent_turn_becomes_agent_and_tool_spans(spans: InMemorySpanExporter) -> None:
    graph = create_react_agent(
        ScriptedChatModel(script=_script()), [get_weather, convert], name="weather_graph"
    )
    handler = TracepassCallbackHandler(agent_version="lg-1")
    with conversation("lc-conv", reference_id="lc-ref") as conv:
        out = graph.invoke(
            {"messages": [HumanMessage("Weather in Paris in F?")]},
            config={"callbacks": [handler]},
        )
    assert out["messages"][-1].content == "It is 64.4F in Paris."
    finished = spans.get_finished_spans()
    turn = one(finished, "invoke_agent weather_graph")
    attrs = dict(turn.attributes or {})
    assert attrs["gen_ai.operation.name"] == "invoke_agent"
    assert attrs["gen_ai.agent.name"] == "weather_graph"
    assert attrs["gen_ai.agent.version"] == "lg-1"
    assert attrs["gen_ai.conversation.id"] == "lc-conv"
    assert attrs["tracepass.reference.id"] == "lc-ref"
    assert attr_json(turn, "gen_ai.input.messages") == [
        {"role": "user", "parts": [{"type": "text", "content": "Weather in Paris in F?"}]}
    ]
    assert attr_json(turn, "gen_ai.output.messages") == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "It is 64.4F in Paris."}],
            "finish_reason": "stop",
        }
    ]
    weather = one(finished, "execute_tool get_weather")
    conv_span = one(finished, "execute_tool convert")
    assert turn.context is not None
    for call in (weather, conv_span):
        assert call.parent is not None
        assert call.parent.span_id == turn.context.span_id
        assert call.attributes is not None
        assert call.attributes["gen_ai.tool.type"] == "function"
        assert call.attributes["gen_ai.conversation.id"] == "lc-conv"
    assert weather.attributes is not None
    assert weather.attributes["gen_ai.tool.call.id"] == "call_w1"
    assert attr_json(weather, "gen_ai.tool.call.arguments") == {"city": "Paris"}
    assert attr_json(weather, "gen_ai.tool.call.result") == {"city": "Paris", "temp_c": 18}
    assert attr_json(conv_span, "gen_ai.tool.call.arguments") == {"celsius": 18}
    # LangChain stringifies scalar tool outputs into ToolMessage content; kept as text.
    assert attr_json(conv_span, "gen_ai.tool.call.result") == "64.4"
    assert conv.turns == 1
    end = one(finished, "tracepass.conversation.end")
    assert end.attributes is not None
    assert end.attributes["tracepass.conversation.turns"] == 1


async def test_async_multi_turn_and_tool_error(spans: InMemorySpanExporter) -> None:
    script = [
        AIMessage(
            content="", tool_calls=[{"name": "explode", "args": {"reason": "x"}, "id": "e1"}]
        ),
        AIMessage(content="Sorry, that failed."),
    ]
    graph = create_react_agent(
        ScriptedChatModel(script=script), ToolNode([explode], handle_tool_errors=True)
    )
    handler = TracepassCallbackHandler(agent_name="helper")
    async with conversation("lc-async") as conv:
        for question in ("first?", "second?"):
            await graph.ainvoke({"messages": [("user", question)]}, config={"callbacks": [handler]})
    assert conv.turns == 2
    finished = spans.get_finished_spans()
    turns = by_name(finished, "invoke_agent helper")
    assert len(turns) == 2
    queries = sorted(attr_json(t, "gen_ai.input.messages")[0]["parts"][0]["content"] for t in turns)
    assert queries == ["first?", "second?"]
    failures = by_name(finished, "execute_tool explode")
    assert len(failures) == 2
    for failure in failures:
        assert failure.status.status_code is StatusCode.ERROR
        assert failure.attributes is not None
        assert failure.attributes["error.type"] == "ValueError"
        assert failure.attributes["gen_ai.tool.call.id"] == "e1"
    assert not handler._calls
    assert not handler._parents


def test_core_only_tool_loop_with_langchain_fake_chat_model(spans: InMemorySpanExporter) -> None:
    """No LangGraph: langchain-core's own fake chat model drives a hand-written
    tool-calling loop, the shape of any plain-LangChain agent."""
    model = GenericFakeChatModel(messages=iter(_script()))
    tools = {t.name: t for t in (get_weather, convert)}

    def loop(messages: list[BaseMessage], config: RunnableConfig) -> str:
        while True:
            reply = model.invoke(messages, config)
            messages.append(reply)
            if not isinstance(reply, AIMessage) or not reply.tool_calls:
                return str(reply.content)
            for call in reply.tool_calls:
                result = tools[call["name"]].invoke({**call, "type": "tool_call"}, config)
                assert isinstance(result, ToolMessage)
                messages.append(result)

    chain = RunnableLambda(loop, name="core_loop")
    handler = TracepassCallbackHandler()
    with conversation("core-conv", reference_id="core-ref") as conv:
        answer = chain.invoke(
            [HumanMessage("Weather in Paris in F?")], config={"callbacks": [handler]}
        )
    assert answer == "It is 64.4F in Paris."
    finished = spans.get_finished_spans()
    turn = one(finished, "invoke_agent core_loop")
    assert turn.context is not None
    assert attr_json(turn, "gen_ai.input.messages") == [
        {"role": "user", "parts": [{"type": "text", "content": "Weather in Paris in F?"}]}
    ]
    assert attr_json(turn, "gen_ai.output.messages")[0]["parts"][0]["content"] == answer
    weather = one(finished, "execute_tool get_weather")
    convert_span = one(finished, "execute_tool convert")
    assert weather.attributes is not None
    assert convert_span.attributes is not None
    assert weather.attributes["gen_ai.tool.call.id"] == "call_w1"
    assert convert_span.attributes["gen_ai.tool.call.id"] == "call_c1"
    assert attr_json(weather, "gen_ai.tool.call.result") == {"city": "Paris", "temp_c": 18}
    assert attr_json(convert_span, "gen_ai.tool.call.arguments") == {"celsius": 18}
    for span in (weather, convert_span):
        assert span.parent is not None
        assert span.parent.span_id == turn.context.span_id
        assert span.attributes is not None
        assert span.attributes["tracepass.reference.id"] == "core-ref"
    assert weather.start_time is not None
    assert convert_span.start_time is not None
    assert weather.start_time < convert_span.start_time  # the model's call order
    assert conv.turns == 1
    assert not handler._calls
    assert not handler._parents


def test_graph_inside_agent_is_a_sub_agent(spans: InMemorySpanExporter) -> None:
    graph = create_react_agent(ScriptedChatModel(script=_script()), [get_weather, convert])
    handler = TracepassCallbackHandler(agent_name="inner_graph")

    @agent(name="outer")
    def outer(question: str) -> str:
        result = graph.invoke({"messages": [("user", question)]}, config={"callbacks": [handler]})
        return str(result["messages"][-1].content)

    with conversation() as conv:
        assert outer("q") == "It is 64.4F in Paris."
    finished = spans.get_finished_spans()
    top = one(finished, "invoke_agent outer")
    inner = one(finished, "invoke_agent inner_graph")
    assert top.context is not None
    assert inner.parent is not None
    assert inner.parent.span_id == top.context.span_id
    assert conv.turns == 1


@pytest.mark.parametrize(
    ("inputs", "expected"),
    [
        ("plain", "plain"),
        ({"input": "hi"}, "hi"),
        ({"messages": [HumanMessage("a"), AIMessage("b"), HumanMessage("c")]}, "c"),
        (
            {"messages": [{"role": "user", "content": [{"type": "text", "text": "blocks"}]}]},
            "blocks",
        ),
        ({"other": 1}, None),
        ([HumanMessage("listed"), AIMessage("x")], "listed"),
        ([("system", "be brief"), ("user", "tuples")], "tuples"),
        (HumanMessage("single"), "single"),
        (AIMessage("not a query"), None),
        (42, None),
    ],
)
def test_extract_query(inputs: Any, expected: str | None) -> None:
    assert extract_query(inputs) == expected


def test_extract_answer() -> None:
    assert extract_answer({"messages": [HumanMessage("q"), AIMessage("final")]}) == "final"
    assert extract_answer({"output": "done"}) == "done"
    assert extract_answer(AIMessage("direct")) == "direct"
    assert extract_answer([HumanMessage("q"), AIMessage("from list")]) == "from list"
    assert extract_answer(HumanMessage("not an answer")) is None
    assert extract_answer(["plain", "strings"]) is None
    assert extract_answer(42) is None
