"""The learned checks on the span shapes of each instrumentation: offered tools and
schemas are read from the spans (normalize → assembly), then checked.

Real spans: the LangGraph fixtures `*_policy.binpb` come from the real OpenInference and
OpenLLMetry instrumentations (tests/data/otlp/thirdparty/generate.py --policy: the model
is bound to its tools and calls get_weather with {"city": 42}); tracepass's own `@tool`
runs in a subprocess (the global tracer provider). The GenAI-semconv and legacy
OpenLLMetry shapes are built attribute by attribute, as those conventions spell them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from test_normalize_basics import make_request, make_span
from test_normalize_instrumentation import spans_of_script

from tracepass.collector.pipeline import assemble_offline
from tracepass.evaluator.models import Conversation
from tracepass.evaluator.scoring.learned_checks import learned_violations

THIRDPARTY = Path(__file__).parent.parent / "data" / "otlp" / "thirdparty"
WEATHER_SCHEMA = {
    "properties": {"city": {"type": "string"}, "unit": {"default": "C", "type": "string"}},
    "required": ["city"],
    "type": "object",
}


def conversations(*requests: ExportTraceServiceRequest) -> list[Conversation]:
    return assemble_offline(requests)


def violations(conv: Conversation) -> list[tuple[str, int, int | None, str | None]]:
    return [(v.rule, v.turn, v.tool_call, v.path) for vs in learned_violations(conv) for v in vs]


@pytest.mark.parametrize("instrumentation", ["openinference", "traceloop"])
def test_real_langgraph_spans(instrumentation: str) -> None:
    data = (THIRDPARTY / f"langgraph_{instrumentation}_policy.binpb").read_bytes()
    (conv,) = conversations(ExportTraceServiceRequest.FromString(data))
    first = conv.turns[0]
    assert first.offered_tools is not None
    assert [t.name for t in first.offered_tools] == ["get_weather", "add"]
    assert first.offered_tools[0].parameters == WEATHER_SCHEMA
    assert [c.name for c in first.tool_calls] == ["get_weather", "add"]
    assert violations(conv) == [
        ("arguments_schema", 0, 0, "$.city"),
        ("unrecovered_tool_error", 0, 0, None),
    ]
    (schema_v, error_v) = learned_violations(conv)[0]
    assert schema_v.message == "get_weather: $.city: 42 is not of type 'string'"
    assert error_v.message.startswith("get_weather failed (1 validation error for get_weather)")


@pytest.mark.parametrize("instrumentation", ["openinference", "traceloop"])
def test_real_spans_without_declared_tools_skip_unknown_tool(instrumentation: str) -> None:
    data = (THIRDPARTY / f"langgraph_{instrumentation}.binpb").read_bytes()
    (conv,) = conversations(ExportTraceServiceRequest.FromString(data))
    assert conv.turns[0].offered_tools is None
    assert violations(conv) == []


def _agent_with_model(model_attrs: dict[str, object], *tool_calls: tuple[str, str]) -> list[object]:
    turn = make_span(
        "invoke_agent travel",
        {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "travel"},
        span_id=1,
        start=1_000,
        end=9_000,
    )
    model = make_span("chat fake", model_attrs, span_id=2, parent=1, start=1_100, end=1_200)
    spans = [turn, model]
    for k, (name, args) in enumerate(tool_calls):
        spans.append(
            make_span(
                f"execute_tool {name}",
                {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": name,
                    "gen_ai.tool.call.arguments": args,
                },
                span_id=3 + k,
                parent=1,
                start=2_000 + k * 100,
                end=2_050 + k * 100,
            )
        )
    return spans


BOOK = {
    "type": "object",
    "required": ["flight_id"],
    "properties": {"flight_id": {"type": "string"}},
}


def test_genai_semconv_tool_definitions() -> None:
    definitions = [
        {"type": "function", "name": "search_flights", "parameters": {"type": "object"}},
        {"type": "function", "name": "book_flight", "parameters": BOOK},
    ]
    spans = _agent_with_model(
        {"gen_ai.operation.name": "chat", "gen_ai.tool.definitions": json.dumps(definitions)},
        ("search_flights", '{"to": "LIS"}'),
        ("delete_account", "{}"),
        ("book_flight", '{"flight_id": 7}'),
    )
    (conv,) = conversations(make_request(*spans))  # type: ignore[arg-type]
    assert violations(conv) == [
        ("unknown_tool", 0, 1, None),
        ("arguments_schema", 0, 2, "$.flight_id"),
    ]


def test_openai_style_definitions_and_truncated_attribute() -> None:
    wrapped = [{"type": "function", "function": {"name": "book_flight", "parameters": BOOK}}]
    spans = _agent_with_model(
        {"gen_ai.operation.name": "chat", "gen_ai.tool.definitions": json.dumps(wrapped)},
        ("book_flight", "{}"),
    )
    (conv,) = conversations(make_request(*spans))  # type: ignore[arg-type]
    assert violations(conv) == [("arguments_schema", 0, 0, "$")]
    cut = _agent_with_model(
        {"gen_ai.operation.name": "chat", "gen_ai.tool.definitions": json.dumps(wrapped)[:30]},
        ("other", "{}"),
    )
    (conv,) = conversations(make_request(*cut))  # type: ignore[arg-type]
    assert conv.turns[0].offered_tools is None  # unreadable: unknown, not "none offered"
    assert violations(conv) == []


def test_openllmetry_request_functions() -> None:
    spans = _agent_with_model(
        {
            "gen_ai.prompt.0.role": "user",
            "gen_ai.prompt.0.content": "book it",
            "llm.request.functions.0.name": "book_flight",
            "llm.request.functions.0.description": "Book a flight.",
            "llm.request.functions.0.parameters": json.dumps(BOOK),
        },
        ("search_flights", "{}"),
    )
    (conv,) = conversations(make_request(*spans))  # type: ignore[arg-type]
    (offered,) = conv.turns[0].offered_tools or ()
    assert (offered.name, offered.description, offered.parameters) == (
        "book_flight",
        "Book a flight.",
        BOOK,
    )
    assert violations(conv) == [("unknown_tool", 0, 0, None)]


def _openinference_turn_and_llm(tool_attributes: dict[str, Any]) -> tuple[Any, Any]:
    """An OpenInference AGENT turn span and its LLM child declaring the offered tools."""
    turn = make_span(
        "agent",
        {
            "openinference.span.kind": "AGENT",
            "input.value": "book",
            "input.mime_type": "text/plain",
        },
        span_id=1,
        start=1_000,
        end=9_000,
    )
    llm = make_span(
        "llm",
        {"openinference.span.kind": "LLM", **tool_attributes},
        span_id=2,
        parent=1,
        start=1_100,
        end=1_200,
    )
    return turn, llm


def test_openinference_llm_tools_shape() -> None:
    tool = {"type": "function", "function": {"name": "book_flight", "parameters": BOOK}}
    turn, llm = _openinference_turn_and_llm({"llm.tools.0.tool.json_schema": json.dumps(tool)})
    call = make_span(
        "book_flight",
        {
            "openinference.span.kind": "TOOL",
            "tool.name": "book_flight",
            "input.value": '{"flight_id": ["x"]}',
        },
        span_id=3,
        parent=1,
        start=2_000,
        end=2_100,
    )
    (conv,) = conversations(make_request(turn, llm, call))
    assert violations(conv) == [("arguments_schema", 0, 0, "$.flight_id")]


_SCRIPT = r"""
import sys
from typing import Literal
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tracepass.instrumentation import agent, conversation, install, tool

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
install(provider)

@tool
def book_flight(flight_id: str, passengers: int = 1, cabin: Literal["eco", "biz"] = "eco") -> str:
    return "ok"

@agent(name="travel")
def bot(question: str) -> str:
    book_flight("TP1", passengers="two")
    book_flight(flight_id="TP2", cabin="biz")
    return "Booked."

with conversation("c-1"):
    bot("Book TP1")
provider.force_flush()
open(sys.argv[1], "wb").write(encode_spans(exporter.get_finished_spans()).SerializeToString())
"""


def test_tracepass_tool_decorator_records_its_schema(tmp_path: Path) -> None:
    (conv,) = conversations(spans_of_script(_SCRIPT, tmp_path))
    turn = conv.turns[0]
    assert turn.offered_tools is None  # @tool says what exists, not what was offered
    assert turn.tool_schemas["book_flight"] == {
        "type": "object",
        "properties": {
            "flight_id": {"type": "string"},
            "passengers": {"type": "integer"},
            "cabin": {"enum": ["eco", "biz"]},
        },
        "required": ["flight_id"],
        "additionalProperties": False,
    }
    (v,) = learned_violations(conv)[0]
    assert (v.rule, v.tool_call, v.path) == ("arguments_schema", 0, "$.passengers")
    assert v.message == "book_flight: $.passengers: 'two' is not of type 'integer'"


def test_agent_span_definitions_and_tool_span_schema() -> None:
    """GenAI semconv allows `gen_ai.tool.definitions` on the agent span (Semantic Kernel
    writes it there); Strands writes each tool's schema as `gen_ai.tool.json_schema`."""
    turn = make_span(
        "invoke_agent travel",
        {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "travel",
            "gen_ai.tool.definitions": json.dumps([{"name": "book_flight", "parameters": BOOK}]),
        },
        span_id=1,
        start=1_000,
        end=9_000,
    )
    search = make_span(
        "execute_tool search_flights",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "search_flights",
            "gen_ai.tool.call.arguments": '{"to": 3}',
            "gen_ai.tool.json_schema": json.dumps(
                {"type": "object", "properties": {"to": {"type": "string"}}}
            ),
        },
        span_id=2,
        parent=1,
        start=2_000,
        end=2_100,
    )
    (conv,) = conversations(make_request(turn, search))
    assert [d.name for d in conv.turns[0].offered_tools or ()] == ["book_flight"]
    assert violations(conv) == [
        ("unknown_tool", 0, 0, None),
        ("arguments_schema", 0, 0, "$.to"),
    ]


def test_openinference_tool_list_in_one_attribute() -> None:
    tools = [{"type": "function", "function": {"name": "book_flight", "parameters": BOOK}}]
    turn, llm = _openinference_turn_and_llm({"llm.tools": json.dumps(tools)})
    call = make_span(
        "search",
        {"openinference.span.kind": "TOOL", "tool.name": "search", "input.value": "{}"},
        span_id=3,
        parent=1,
        start=2_000,
        end=2_100,
    )
    (conv,) = conversations(make_request(turn, llm, call))
    assert violations(conv) == [("unknown_tool", 0, 0, None)]
