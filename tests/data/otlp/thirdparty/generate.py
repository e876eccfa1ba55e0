"""Produce OTLP fixtures from REAL third-party LangChain instrumentations.

Runs a two-turn LangGraph tool-calling agent (hand-built StateGraph + ToolNode, a
langchain-core fake chat model that "calls" tools) under one instrumentation, captures
the finished spans with the OpenTelemetry SDK and encodes them with the OTLP exporter's
own encoder into one binary `ExportTraceServiceRequest`.

    python tests/data/otlp/thirdparty/generate.py openinference OUT.binpb
    python tests/data/otlp/thirdparty/generate.py traceloop OUT.binpb

or sends the spans with the REAL OTLP exporter (BatchSpanProcessor, small batches, so
one conversation arrives split across many export requests) to a running receiver:

    python tests/data/otlp/thirdparty/generate.py openinference --otlp-grpc HOST:PORT
    python tests/data/otlp/thirdparty/generate.py traceloop --otlp-http http://HOST:PORT/v1/traces

Run one instrumentation per process: both patch LangChain's callback manager globally.
The scenario below is what tests/collector/test_thirdparty_langgraph.py asserts.

With `--policy` first (`generate.py --policy openinference OUT.binpb`) the model is
really bound to its tools (so the model spans declare them) and turn 1 calls
`get_weather` with `{"city": 42}`, which the tool's schema refuses (the real ToolNode
reports the validation error), then `add` as usual: the fixtures of the learned checks
(tests/collector/test_learned_checks_thirdparty.py).
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


POLICY_BAD_ARGS = {"city": 42, "unit": "C"}


def _agent(policy: bool = False) -> Any:
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
            if not policy:
                return self
            from langchain_core.utils.function_calling import convert_to_openai_tool

            # Bound like a real provider model: the tools reach the invocation params,
            # which is where the instrumentations read the tool definitions from.
            return self.bind(tools=[convert_to_openai_tool(t) for t in tools])

    script = iter(
        [
            AIMessage(
                content="",
                tool_calls=[
                    {
                        "name": "get_weather",
                        "args": POLICY_BAD_ARGS if policy else {"city": "Paris", "unit": "C"},
                        "id": "call_w1",
                    }
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


def _instrumentor(instrumentation: str) -> Any:
    if instrumentation == "openinference":
        from openinference.instrumentation.langchain import LangChainInstrumentor

        return LangChainInstrumentor()
    if instrumentation == "traceloop":
        from opentelemetry.instrumentation.langchain import LangchainInstrumentor

        return LangchainInstrumentor()
    raise SystemExit(f"unknown instrumentation {instrumentation!r}: openinference|traceloop")


def _run(instrumentation: str, processor: Any, policy: bool = False) -> Any:
    """Drive the two-turn scenario under `instrumentation`; returns the provider (flushed)."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider

    provider = TracerProvider(
        resource=Resource.create({"service.name": SERVICE_NAME, "service.version": "1.4.0"})
    )
    provider.add_span_processor(processor)
    instrumentor = _instrumentor(instrumentation)
    instrumentor.instrument(tracer_provider=provider)
    try:
        agent = _agent(policy)
        config = {"configurable": {"thread_id": THREAD_ID}}
        out1 = agent.invoke({"messages": [("user", TURN1_QUERY)]}, config=config)
        out2 = agent.invoke({"messages": [("user", TURN2_QUERY)]}, config=config)
        assert out1["messages"][-1].content == TURN1_ANSWER
        assert out2["messages"][-1].content == TURN2_ANSWER
    finally:
        instrumentor.uninstrument()
    provider.force_flush()
    return provider


def capture(instrumentation: str, policy: bool = False) -> bytes:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    _run(instrumentation, SimpleSpanProcessor(exporter), policy)
    request = encode_spans(exporter.get_finished_spans())
    data: bytes = request.SerializeToString()
    return data


class _Checked:
    """Wraps an exporter so a failed export makes the process fail (exit 1)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.failures = 0

    def export(self, spans: Any) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        result = self.inner.export(spans)
        if result is not SpanExportResult.SUCCESS:
            self.failures += 1
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return bool(self.inner.force_flush(timeout_millis))


def send(instrumentation: str, protocol: str, endpoint: str) -> int:
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    inner: Any
    if protocol == "--otlp-grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        inner = OTLPSpanExporter(endpoint=endpoint, insecure=True, timeout=20)
    elif protocol == "--otlp-http":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
            OTLPSpanExporter as HttpExporter,
        )

        inner = HttpExporter(endpoint=endpoint, timeout=20)
    else:
        raise SystemExit(f"unknown mode {protocol!r}: --otlp-grpc|--otlp-http")
    exporter = _Checked(inner)
    processor = BatchSpanProcessor(exporter, max_export_batch_size=5, schedule_delay_millis=50)
    _run(instrumentation, processor).shutdown()
    if exporter.failures:
        print(f"{exporter.failures} export requests failed", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str]) -> int:
    policy = bool(argv) and argv[0] == "--policy"
    if policy:
        argv = argv[1:]
        if len(argv) != 2:
            print(__doc__, file=sys.stderr)
            return 2
    if len(argv) == 3:
        return send(*argv)
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    Path(argv[1]).write_bytes(capture(argv[0], policy))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
