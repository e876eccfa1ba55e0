"""configure(): idempotence on an existing provider, and real OTLP round trips.

A process can set its global tracer provider only once, so the "fresh process" paths run
the instrumented agent in a subprocess exporting to a receiver running in this test.
"""

from __future__ import annotations

import asyncio
import os
import sys
import textwrap
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest
from aiohttp import web
from opentelemetry import trace
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tracepass.instrumentation import configure, shutdown, tool
from tracepass.instrumentation._context import is_installed

pytestmark = pytest.mark.slow  # starts a process or a server

AGENT_SCRIPT = textwrap.dedent(
    """
    import sys
    from tracepass.instrumentation import agent, configure, conversation, shutdown, tool

    kwargs = eval(sys.argv[1])
    configure(**kwargs)

    @tool
    def lookup(city: str) -> dict:
        return {"city": city, "temp": 7}

    @agent(name="travel", version="3")
    def travel(question: str) -> str:
        return "It is %d" % lookup("Bergen")["temp"]

    with conversation("rt-conv", reference_id="rt-ref"):
        travel("Weather in Bergen?")
    shutdown()
    """
)


def _processors(provider: TracerProvider) -> list[Any]:
    return list(provider._active_span_processor._span_processors)


def test_configure_on_existing_provider_is_idempotent(provider: TracerProvider) -> None:
    assert trace.get_tracer_provider() is provider
    before = _processors(provider)
    assert configure(service_name="svc") is provider
    assert configure(service_name="svc") is provider
    assert _processors(provider) == before  # no exporter without an explicit request
    assert is_installed(provider)

    exporter = InMemorySpanExporter()
    configure(exporter=exporter)
    configure(exporter=exporter)
    added = _processors(provider)[len(before) :]
    assert len(added) == 1  # exactly one extra exporter, however often configure runs

    @tool
    def ping() -> str:
        return "pong"

    ping()
    shutdown()  # flushes and stops only what tracepass added; the app's provider lives on
    assert [s.name for s in exporter.get_finished_spans()] == ["execute_tool ping"]
    assert isinstance(trace.get_tracer_provider(), TracerProvider)


def _attrs(span: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in span.attributes:
        value: AnyValue = kv.value
        out[kv.key] = getattr(value, value.WhichOneof("value"))
    return out


def _check_round_trip(requests: list[trace_service_pb2.ExportTraceServiceRequest]) -> None:
    spans: dict[str, Any] = {}
    services = set()
    for req in requests:
        for rs in req.resource_spans:
            for kv in rs.resource.attributes:
                if kv.key == "service.name":
                    services.add(kv.value.string_value)
            for ss in rs.scope_spans:
                assert ss.scope.name == "tracepass.instrumentation"
                for span in ss.spans:
                    spans[span.name] = span
    assert services == {"round-trip-svc"}
    assert set(spans) == {
        "invoke_agent travel",
        "execute_tool lookup",
        "tracepass.conversation.end",
    }
    turn = _attrs(spans["invoke_agent travel"])
    assert turn["gen_ai.agent.name"] == "travel"
    assert turn["gen_ai.agent.version"] == "3"
    assert turn["gen_ai.conversation.id"] == "rt-conv"
    assert turn["tracepass.reference.id"] == "rt-ref"
    assert spans["execute_tool lookup"].parent_span_id == spans["invoke_agent travel"].span_id
    tool_attrs = _attrs(spans["execute_tool lookup"])
    assert tool_attrs["gen_ai.tool.call.arguments"] == '{"city": "Bergen"}'
    assert tool_attrs["gen_ai.tool.call.result"] == '{"city": "Bergen", "temp": 7}'
    end = spans["tracepass.conversation.end"]
    assert end.start_time_unix_nano == end.end_time_unix_nano
    assert _attrs(end) == {
        "tracepass.conversation.end": True,
        "gen_ai.conversation.id": "rt-conv",
        "tracepass.reference.id": "rt-ref",
        "tracepass.conversation.turns": 1,
    }


async def _run_agent(tmp_path: Path, kwargs: str, env: dict[str, str]) -> None:
    script = tmp_path / "agent.py"
    script.write_text(AGENT_SCRIPT)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(script),
        kwargs,
        env={**clean, **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()


@pytest.mark.parametrize(
    ("variable", "path"),
    [("OTEL_EXPORTER_OTLP_ENDPOINT", ""), ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "/v1/traces")],
)
async def test_http_round_trip_fresh_process_env_endpoint(
    tmp_path: Path, variable: str, path: str
) -> None:
    received: list[trace_service_pb2.ExportTraceServiceRequest] = []

    async def handle(request: web.Request) -> web.Response:
        assert request.content_type == "application/x-protobuf"
        assert request.headers.get("x-team") == "evals"  # from OTEL_EXPORTER_OTLP_HEADERS
        req = trace_service_pb2.ExportTraceServiceRequest()
        req.ParseFromString(await request.read())
        received.append(req)
        body = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
        return web.Response(body=body, content_type="application/x-protobuf")

    app = web.Application()
    app.router.add_post("/v1/traces", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        port = runner.addresses[0][1]
        await _run_agent(
            tmp_path,
            "{'service_name': 'round-trip-svc'}",
            {
                variable: f"http://127.0.0.1:{port}{path}",
                "OTEL_EXPORTER_OTLP_HEADERS": "x-team=evals",
            },
        )
    finally:
        await runner.cleanup()
    _check_round_trip(received)


class _Collector(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self) -> None:
        self.requests: list[trace_service_pb2.ExportTraceServiceRequest] = []
        self.metadata: list[dict[str, str]] = []

    def Export(
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: Any
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        self.requests.append(request)
        self.metadata.append({k: v for k, v in context.invocation_metadata()})
        return trace_service_pb2.ExportTraceServiceResponse()


def _grpc_collector() -> tuple[_Collector, grpc.Server, int]:
    collector = _Collector()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(collector, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return collector, server, port


async def test_grpc_round_trip_fresh_process_explicit_endpoint(tmp_path: Path) -> None:
    collector, server, port = _grpc_collector()
    try:
        await _run_agent(
            tmp_path,
            "{'service_name': 'round-trip-svc', 'protocol': 'grpc', "
            f"'endpoint': 'http://127.0.0.1:{port}'}}",
            {},
        )
    finally:
        server.stop(grace=None)
    _check_round_trip(collector.requests)


async def test_grpc_chosen_by_env_protocol_endpoint_and_headers(tmp_path: Path) -> None:
    """configure() with no export arguments at all: everything from OTEL_EXPORTER_OTLP_*."""
    collector, server, port = _grpc_collector()
    try:
        await _run_agent(
            tmp_path,
            "{'service_name': 'round-trip-svc'}",
            {
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc",
                "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
                "OTEL_EXPORTER_OTLP_HEADERS": "x-team=evals",
            },
        )
    finally:
        server.stop(grace=None)
    _check_round_trip(collector.requests)
    assert collector.metadata
    assert all(md.get("x-team") == "evals" for md in collector.metadata)


def test_bad_protocol_is_a_precise_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
    with pytest.raises(ValueError, match=r"unsupported OTLP protocol 'http/json'"):
        configure()
