"""build_telemetry: the OTLP push readers against real loopback servers (aiohttp for
OTLP/HTTP, grpc.aio for OTLP/gRPC), Prometheus on port 0, environment fallbacks."""

from __future__ import annotations

import asyncio
import urllib.request
from typing import Any

import grpc
import pytest
from aiohttp import web
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.metrics.v1 import (
    metrics_service_pb2,
    metrics_service_pb2_grpc,
)

from tracepass.collector.config import MetricsConfig
from tracepass.collector.export.telemetry import build_telemetry, otlp_settings


def metric_names(req: metrics_service_pb2.ExportMetricsServiceRequest) -> set[str]:
    return {m.name for rm in req.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}


async def test_otlp_http_push_of_metrics_and_events() -> None:
    got: dict[str, list[bytes]] = {"metrics": [], "logs": []}

    async def handle(request: web.Request) -> web.Response:
        got[request.match_info["signal"]].append(await request.read())
        return web.Response(status=200, content_type="application/x-protobuf", body=b"")

    app = web.Application()
    app.router.add_post("/v1/{signal}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    config = MetricsConfig(
        prometheus_enabled=False,
        otlp_endpoint=f"http://127.0.0.1:{port}",
        otlp_protocol="http/protobuf",
        export_interval_s=60,
    )
    tel = build_telemetry(config)
    try:
        tel.meter().create_counter("tracepass_conversations").add(3, {"outcome": "pass"})
        logger = tel.event_logger()
        assert logger is not None
        logger.emit(
            event_name="gen_ai.evaluation.result", attributes={"gen_ai.evaluation.name": "x"}
        )
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, tel.meter_provider.force_flush)
        assert tel.logger_provider is not None
        await loop.run_in_executor(None, tel.logger_provider.force_flush)
    finally:
        await asyncio.get_running_loop().run_in_executor(None, tel.shutdown)
        await runner.cleanup()
    req = metrics_service_pb2.ExportMetricsServiceRequest.FromString(got["metrics"][0])
    assert "tracepass_conversations" in metric_names(req)
    logs = logs_service_pb2.ExportLogsServiceRequest.FromString(got["logs"][0])
    rec = logs.resource_logs[0].scope_logs[0].log_records[0]
    assert rec.event_name == "gen_ai.evaluation.result"


class _MetricsService(metrics_service_pb2_grpc.MetricsServiceServicer):
    def __init__(self) -> None:
        self.requests: list[metrics_service_pb2.ExportMetricsServiceRequest] = []

    async def Export(self, request: Any, context: Any) -> Any:
        self.requests.append(request)
        return metrics_service_pb2.ExportMetricsServiceResponse()


async def test_otlp_grpc_push() -> None:
    server = grpc.aio.server()
    svc = _MetricsService()
    metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(svc, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    config = MetricsConfig(
        prometheus_enabled=False,
        otlp_endpoint=f"http://127.0.0.1:{port}",
        otlp_protocol="grpc",
        emit_evaluation_events=False,
    )
    tel = build_telemetry(config)
    loop = asyncio.get_running_loop()
    try:
        tel.meter().create_counter("tracepass_turns").add(1)
        await loop.run_in_executor(None, tel.meter_provider.force_flush)
    finally:
        await loop.run_in_executor(None, tel.shutdown)
        await server.stop(None)
    assert any("tracepass_turns" in metric_names(r) for r in svc.requests)


def test_prometheus_port_zero_reports_bound_port() -> None:
    config = MetricsConfig(prometheus_host="127.0.0.1", prometheus_port=0)
    a, b = build_telemetry(config), build_telemetry(config)
    try:
        assert a.prometheus_port != b.prometheus_port
        a.meter().create_counter("tracepass_a").add(1)
        assert a.prometheus_url is not None
        with urllib.request.urlopen(a.prometheus_url, timeout=10) as resp:
            text = resp.read().decode()
        assert "tracepass_a_total" in text
        # Private registries: one provider's series never leak into another's page.
        assert b.prometheus_url is not None
        with urllib.request.urlopen(b.prometheus_url, timeout=10) as resp:
            assert "tracepass_a_total" not in resp.read().decode()
    finally:
        a.shutdown()
        b.shutdown()
        a.shutdown()  # idempotent


def test_otlp_settings_env_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = MetricsConfig()
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", raising=False)
    assert otlp_settings(cfg, "metrics") == (None, "http/protobuf")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://gw:4318")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "grpc")
    assert otlp_settings(cfg, "metrics") == ("http://gw:4318", "grpc")
    assert otlp_settings(cfg, "logs") == ("http://gw:4318", "http/protobuf")
    explicit = MetricsConfig(otlp_endpoint="http://x:4317", otlp_protocol="grpc")
    assert otlp_settings(explicit, "metrics") == ("http://x:4317", "grpc")


def test_no_exporters_when_disabled(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"):
        monkeypatch.delenv(var, raising=False)
    tel = build_telemetry(MetricsConfig(prometheus_enabled=False, emit_evaluation_events=False))
    try:
        assert tel.prometheus_port is None
        assert tel.prometheus_url is None
        assert tel.event_logger() is None
    finally:
        tel.shutdown()
