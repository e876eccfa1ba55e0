"""Spans from tracepass's own instrumentation, normalized.

Run in a subprocess: the decorators use the global tracer provider, which can be set
only once per process and must not leak into other tests sharing an xdist worker.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracepass.collector.normalize import RecordKind, normalize_request

pytestmark = pytest.mark.slow  # starts a process or a server

_SCRIPT = r"""
import sys
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tracepass.instrumentation import agent, conversation, install, tool

exporter = InMemorySpanExporter()
provider = TracerProvider(resource=Resource.create({"service.name": "svc"}))
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
install(provider)

@tool
def get_weather(city: str, unit: str = "C") -> dict:
    return {"city": city, "temp": 21}

@tool(name="divide")
def divide(a: float, b: float) -> float:
    return a / b

@agent(name="weather-bot", version="7")
def bot(question: str) -> str:
    get_weather("Paris", unit="F")
    try:
        divide(1, 0)
    except ZeroDivisionError:
        pass
    return "Sunny."

with conversation("conv-9", reference_id="ref-3"):
    bot("Weather in Paris?")
    bot("And tomorrow?")
provider.force_flush()
open(sys.argv[1], "wb").write(encode_spans(exporter.get_finished_spans()).SerializeToString())
"""


def spans_of_script(script: str, tmp_path: Path) -> ExportTraceServiceRequest:
    """Run `script` (which writes its spans as one OTLP request to argv[1]) in a fresh
    interpreter; return the request."""
    out = tmp_path / "spans.binpb"
    proc = subprocess.run(
        [sys.executable, "-c", script, str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return ExportTraceServiceRequest.FromString(out.read_bytes())


def test_tracepass_instrumentation_spans(tmp_path: Path) -> None:
    records, rejections = normalize_request(spans_of_script(_SCRIPT, tmp_path))
    assert rejections == []
    assert {r.conversation_id for r in records} == {"conv-9"}
    assert {r.reference_id for r in records} == {"ref-3"}
    turns = sorted((r for r in records if r.kind is RecordKind.TURN), key=lambda r: r.start_ns)
    assert [(t.input_text, t.output_text) for t in turns] == [
        ("Weather in Paris?", "Sunny."),
        ("And tomorrow?", "Sunny."),
    ]
    assert {(t.agent_name, t.agent_version) for t in turns} == {("weather-bot", "7")}
    tools = sorted((r for r in records if r.kind is RecordKind.TOOL), key=lambda r: r.start_ns)
    assert [t.tool_name for t in tools] == ["get_weather", "divide"] * 2
    weather, div = tools[0], tools[1]
    assert weather.tool_arguments == {"city": "Paris", "unit": "F"}
    assert weather.tool_result == {"city": "Paris", "temp": 21}
    assert weather.tool_call_id
    assert weather.parent_span_id == turns[0].span_id
    assert div.tool_arguments == {"a": 1, "b": 0}
    assert div.error is not None
    (end,) = [r for r in records if r.kind is RecordKind.END]
    assert end.attributes["tracepass.conversation.turns"] == 2
