"""`inspect_requests`: provenance per span and warnings for shapes that look misread."""

from __future__ import annotations

import json

from opentelemetry.proto.trace.v1.trace_pb2 import Span
from test_normalize_basics import make_request, make_span

from tracepass.collector.assembly.inspection import inspect_requests

CONV = {"session.id": "c-1"}


def spans_read_without_their_adapter() -> list[Span]:
    """smolagents/LlamaIndex-like shapes from a scope no adapter knows."""
    return [
        make_span(
            "agent.run",
            {
                **CONV,
                "openinference.span.kind": "AGENT",
                "input.value": "Weather?",
                "input.mime_type": "text/plain",
                "output.value": "StopEvent(result=AgentOutput(response=…",
                "output.mime_type": "text/plain",
            },
            span_id=1,
            start=1,
            end=100,
        ),
        make_span(
            "llm",
            {
                **CONV,
                "openinference.span.kind": "LLM",
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "book",
                "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": '{"id": "X"}',
            },
            span_id=2,
            parent=1,
            start=2,
            end=5,
        ),
        make_span(
            "GetWeather",
            {
                **CONV,
                "openinference.span.kind": "TOOL",
                "tool.name": "get_weather",
                # Positional values: not the keyword-only wrapper OpenInference unwraps.
                "input.value": json.dumps({"args": ["Paris"], "kwargs": {}}),
                "output.value": json.dumps([{"text": "Sunny"}]),
            },
            span_id=3,
            parent=1,
            start=6,
            end=7,
        ),
        make_span(
            "book",
            {**CONV, "openinference.span.kind": "TOOL", "tool.name": "book"},
            span_id=4,
            parent=1,
            start=8,
            end=9,
        ),
        make_span(
            "nameless",
            {**CONV, "openinference.span.kind": "TOOL"},
            span_id=5,
            parent=1,
            start=10,
            end=11,
        ),
        make_span(
            "custom.step", {**CONV, "input.value": "{}"}, span_id=6, parent=1, start=12, end=13
        ),
    ]


def test_warnings_name_each_misread_shape() -> None:
    report = inspect_requests([make_request(*spans_read_without_their_adapter())])
    (conv,) = report.conversations
    (turn,) = conv.turns
    text = "\n".join(turn.warnings)
    assert "get_weather: arguments still wrapped (['args', 'kwargs'])" in text
    assert "get_weather: result still wrapped" in text
    # Book has a requested id "X" but the span had none: recovered, so no warning.
    assert not any(w.startswith("book:") for w in turn.warnings)
    assert "answer looks like an object repr" in text
    assert "has no tool name" in text
    assert "span 0000000000000006 ('custom.step') carries input.value but no convention" in text
    assert report.warning_count == len(turn.warnings)


def test_spans_report_convention_adapter_and_field_sources() -> None:
    report = inspect_requests([make_request(*spans_read_without_their_adapter())])
    (turn,) = report.conversations[0].turns
    by_name = {s.name: s for s in turn.spans}
    assert by_name["GetWeather"].convention == "openinference"
    assert by_name["GetWeather"].fields["tool_arguments"] == "attribute"
    assert by_name["custom.step"].convention is None
    book = next(c for c in turn.tool_calls if c.name == "book")
    assert (book.arguments, book.arguments_source) == ({"id": "X"}, "model_request")
    assert report.spans_by_convention == {"(none)": 1, "openinference": 5}
