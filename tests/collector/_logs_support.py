"""An agent run whose content lives only in GenAI log-record events, made with the real
OTel SDK (TracerProvider + LoggerProvider), the way the contrib GenAI instrumentations
emit it with content capture on: the spans carry names, ids and structure; the user
message, the model's tool-call request, the tool's result (as the next model call's
`gen_ai.tool.message`) and the answer are log records in the context of their span.

Half of the events name themselves in `LogRecord.event_name`, the other half in the
`event.name` attribute (what the events API wrote before the field existed)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk._logs import LoggerProvider, ReadableLogRecord
from opentelemetry.sdk._logs.export import (
    InMemoryLogRecordExporter,
    LogRecordExporter,
    SimpleLogRecordProcessor,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


@dataclass(frozen=True)
class Truth:
    query: str
    answer: str
    arguments: dict[str, Any]
    result: str


@dataclass(frozen=True)
class Run:
    spans: list[ReadableSpan]
    logs: list[ReadableLogRecord]
    truth: list[Truth]

    def traces_request(self) -> ExportTraceServiceRequest:
        return encode_spans(self.spans)

    def logs_request(self) -> ExportLogsServiceRequest:
        return encode_logs(self.logs)


def genai_run(conversation: str = "conv-logs", turns: int = 2) -> Run:
    resource = Resource.create({"service.name": "events-agent"})
    spans_out = InMemorySpanExporter()
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans_out))
    logs_out = InMemoryLogRecordExporter()
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs_out))
    tracer = tracer_provider.get_tracer("tests.logs")
    logger = logger_provider.get_logger("tests.logs")
    flip = [False]

    def event(span: trace.Span, name: str, body: Any) -> None:
        ctx = trace.set_span_in_context(span)
        flip[0] = not flip[0]
        if flip[0]:
            logger.emit(event_name=name, body=body, context=ctx)
        else:
            logger.emit(attributes={"event.name": name}, body=body, context=ctx)

    truth: list[Truth] = []
    for n in range(turns):
        t = Truth(
            f"weather in city {n}?", f"it is sunny in city {n}", {"city": f"city {n}"}, "sunny"
        )
        truth.append(t)
        call_id = f"call-{conversation}-{n}"
        agent_attrs = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "weather",
            "gen_ai.conversation.id": conversation,
        }
        with tracer.start_as_current_span("invoke_agent weather", attributes=agent_attrs):
            with tracer.start_as_current_span(
                "chat m", attributes={"gen_ai.operation.name": "chat"}
            ) as chat:
                event(chat, "gen_ai.user.message", {"content": t.query})
                request = {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": json.dumps(t.arguments)},
                }
                event(chat, "gen_ai.choice", {"index": 0, "message": {"tool_calls": [request]}})
            with tracer.start_as_current_span(
                "execute_tool get_weather",
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "get_weather",
                    "gen_ai.tool.call.id": call_id,
                },
            ):
                pass
            with tracer.start_as_current_span(
                "chat m", attributes={"gen_ai.operation.name": "chat"}
            ) as chat:
                event(chat, "gen_ai.user.message", {"content": t.query})
                event(chat, "gen_ai.tool.message", {"id": call_id, "content": t.result})
                event(chat, "gen_ai.choice", {"index": 0, "message": {"content": t.answer}})
    # Not a GenAI event: logs pipelines carry everything; it must be ignored, not fail.
    logger.emit(body="an ordinary application log line")
    tracer_provider.shutdown()
    logger_provider.shutdown()
    return Run(list(spans_out.get_finished_spans()), list(logs_out.get_finished_logs()), truth)


def rebuilt(turns: Sequence[Any]) -> list[Truth]:
    """The conversation's turns in the shape of `Truth` (one tool call per turn)."""
    out: list[Truth] = []
    for turn in turns:
        (call,) = turn.tool_calls
        out.append(Truth(turn.query, turn.answer, dict(call.arguments), call.result))
    return out


def export_logs_with(exporter: LogRecordExporter, logs: Sequence[ReadableLogRecord]) -> Any:
    """One export through a real SDK log exporter, then its shutdown (blocking)."""
    try:
        return exporter.export(logs)
    finally:
        exporter.shutdown()
