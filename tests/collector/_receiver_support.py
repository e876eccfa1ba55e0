"""Shared pieces of the receiver and OTLP-file tests: spans from the real OTel SDK,
a recording sink, metric readers, OTLP/JSON rendering with hex ids."""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode

from tracepass.collector.instruments import CollectorInstruments
from tracepass.collector.receiver.sink import IngestResult, Overloaded


def _text(role: str, text: str) -> str:
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": text}]}])


def make_spans(n_turns: int = 2, conversation: str = "conv-1") -> list[ReadableSpan]:
    """A small GenAI-semconv agent trace per turn: invoke_agent (query and answer as
    JSON messages) → chat + execute_tool (failing on odd turns), with typed attributes
    of every kind so the encodings have something to get wrong."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(
        resource=Resource.create({"service.name": "test-agent", "service.version": "1.2.3"})
    )
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("tests.receiver", "0.1")
    for turn in range(n_turns):
        with tracer.start_as_current_span(
            "invoke_agent weather",
            kind=SpanKind.INTERNAL,
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.conversation.id": conversation,
                "gen_ai.agent.name": "weather",
                "gen_ai.input.messages": _text("user", f"question {turn}"),
                "gen_ai.output.messages": _text("assistant", f"answer {turn}"),
                "turn": turn,
                "score": 0.5,
                "flag": True,
                "tags": ["a", "b"],
            },
        ):
            with tracer.start_as_current_span(
                "chat model",
                kind=SpanKind.CLIENT,
                attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"},
            ) as chat:
                chat.add_event("gen_ai.user.message", {"content": f"question {turn}"})
            with tracer.start_as_current_span(
                "execute_tool get_weather",
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "get_weather",
                    "gen_ai.tool.call.id": f"call-{turn}",
                    "gen_ai.tool.call.arguments": json.dumps({"city": "Paris", "turn": turn}),
                    "gen_ai.tool.call.result": f"sunny {turn}",
                },
            ) as tool:
                if turn % 2:
                    tool.set_status(Status(StatusCode.ERROR, "boom"))
    provider.shutdown()
    return list(exporter.get_finished_spans())


def make_request(n_turns: int = 2, conversation: str = "conv-1") -> ExportTraceServiceRequest:
    return encode_spans(make_spans(n_turns, conversation))


def to_otlp_json(request: Message) -> dict[str, Any]:
    """OTLP/JSON as the spec writes it: camelCase keys, hex ids, int enums."""
    doc = json_format.MessageToDict(request, use_integers_for_enums=True)

    def fix(obj: Any) -> None:
        if isinstance(obj, dict):
            for k, v in obj.items():
                if k in ("traceId", "spanId", "parentSpanId") and isinstance(v, str):
                    obj[k] = base64.b64decode(v).hex()
                else:
                    fix(v)
        elif isinstance(obj, list):
            for item in obj:
                fix(item)

    fix(doc)
    return doc


def span_ids(request: ExportTraceServiceRequest) -> set[tuple[bytes, bytes]]:
    return {
        (s.trace_id, s.span_id)
        for rs in request.resource_spans
        for ss in rs.scope_spans
        for s in ss.spans
    }


@dataclass
class RecordingSink:
    """Records requests; can be overloaded for the first N calls, reject spans, block."""

    overloaded_calls: int = 0
    retry_after_s: float = 0.05
    reject: int = 0
    fail: bool = False
    is_ready: bool = True
    gate: asyncio.Event | None = None
    requests: list[ExportTraceServiceRequest] = field(default_factory=list)
    logs: list[ExportLogsServiceRequest] = field(default_factory=list)
    calls: int = 0
    entered: asyncio.Event = field(default_factory=asyncio.Event)

    async def ingest(self, request: ExportTraceServiceRequest) -> IngestResult:
        await self._enter()
        self.requests.append(request)
        n = sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
        return self._result(n)

    async def ingest_logs(self, request: ExportLogsServiceRequest) -> IngestResult:
        await self._enter()
        self.logs.append(request)
        return self._result(
            sum(len(sl.log_records) for rl in request.resource_logs for sl in rl.scope_logs)
        )

    async def _enter(self) -> None:
        self.calls += 1
        self.entered.set()
        if self.gate is not None:
            await self.gate.wait()
        if self.calls <= self.overloaded_calls:
            raise Overloaded("queue full (test)", retry_after_s=self.retry_after_s)
        if self.fail:
            raise RuntimeError("sink exploded")

    def _result(self, n: int) -> IngestResult:
        if self.reject:
            return IngestResult(accepted=n - self.reject, rejected=self.reject, message="no ids")
        return IngestResult(accepted=n)

    def ready(self) -> bool:
        return self.is_ready

    def received(self) -> set[tuple[bytes, bytes]]:
        out: set[tuple[bytes, bytes]] = set()
        for r in self.requests:
            out |= span_ids(r)
        return out


class Metrics:
    def __init__(self) -> None:
        self.reader = InMemoryMetricReader()
        self.provider = MeterProvider(metric_readers=[self.reader])
        self.instruments = CollectorInstruments.create(self.provider.get_meter("test"))

    def value(self, name: str, **labels: str) -> float:
        data = self.reader.get_metrics_data()
        total = 0.0
        if data is None:
            return total
        for rm in data.resource_metrics:
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    if m.name != name:
                        continue
                    for point in m.data.data_points:
                        attrs = dict(point.attributes or {})
                        if all(attrs.get(k) == v for k, v in labels.items()):
                            total += getattr(point, "value", 0)
        return total


def self_signed_cert(directory: Path) -> tuple[Path, Path]:
    """A throwaway localhost certificate made with the openssl CLI."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost,IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return cert, key


def export_with(exporter: SpanExporter, spans: list[ReadableSpan]) -> Any:
    try:
        return exporter.export(spans)
    finally:
        exporter.shutdown()


def chunks(data: bytes, size: int) -> Iterator[bytes]:
    for i in range(0, len(data), size):
        yield data[i : i + size]
