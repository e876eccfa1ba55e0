"""Produce OTLP fixtures from REAL third-party LangChain instrumentations.

Runs a two-turn LangGraph tool-calling agent (hand-built StateGraph + ToolNode, a
langchain-core fake chat model that "calls" tools) under one instrumentation, captures
the finished spans with the OpenTelemetry SDK and encodes them with the OTLP exporter's
own encoder into one binary `ExportTraceServiceRequest`.

    python tests/data/otlp/thirdparty/generate.py openinference OUT.binpb
    python tests/data/otlp/thirdparty/generate.py traceloop OUT.binpb

Run one instrumentation per process: both patch LangChain's callback manager globally.
The scenario below is what tests/collector/test_thirdparty_langgraph.py asserts.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

THREAD_ID = "thread-42"
TURN1_QUERY = "What is the weather in Paris, and what is 2 + 3?"
TURN1_ANSWER = "It is sunny in Paris (21 C), and 2 + 3 = 5."
TURN2_QUERY = "Thanks! Anything else?"
TURN2_ANSWER = "You're welcome, that's all."
SERVICE_NAME = "weather-agent"


def _agent() -> Any:
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    @tool
    def get_weather(city: str, unit: str = "C") -> str:
        """Current weather for a city."""
        return f"Sunny in {city}, 21 {unit}"

    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    class ToolCallingFake(GenericFakeChatModel):
        """The fake model ignores the tools it is bound to: its script already knows."""

        def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
            return self

    script = iter(
        [
            AIMessage(
                content="",
                tool_calls=[
                    {"name": "get_weather", "args": {"city": "Paris", "unit": "C"}, "id": "call_w1"}
                ],
            ),
            AIMessage(
                content="", tool_calls=[{"name": "add", "args": {"a": 2, "b": 3}, "id": "call_a1"}]
            ),
            AIMessage(content=TURN1_ANSWER),
            AIMessage(content=TURN2_ANSWER),
        ]
    )
    tools = [get_weather, add]
    model = ToolCallingFake(messages=script).bind_tools(tools)

    def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", call_model)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=InMemorySaver())


def capture(instrumentation: str) -> bytes:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider(
        resource=Resource.create({"service.name": SERVICE_NAME, "service.version": "1.4.0"})
    )
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor: Any
    if instrumentation == "openinference":
        from openinference.instrumentation.langchain import LangChainInstrumentor

        instrumentor = LangChainInstrumentor()
    elif instrumentation == "traceloop":
        from opentelemetry.instrumentation.langchain import LangchainInstrumentor

        instrumentor = LangchainInstrumentor()
    else:
        raise SystemExit(f"unknown instrumentation {instrumentation!r}: openinference|traceloop")
    instrumentor.instrument(tracer_provider=provider)
    try:
        agent = _agent()
        config = {"configurable": {"thread_id": THREAD_ID}}
        out1 = agent.invoke({"messages": [("user", TURN1_QUERY)]}, config=config)
        out2 = agent.invoke({"messages": [("user", TURN2_QUERY)]}, config=config)
        assert out1["messages"][-1].content == TURN1_ANSWER
        assert out2["messages"][-1].content == TURN2_ANSWER
    finally:
        instrumentor.uninstrument()
    provider.force_flush()
    request = encode_spans(exporter.get_finished_spans())
    data: bytes = request.SerializeToString()
    return data


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    Path(argv[1]).write_bytes(capture(argv[0]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
