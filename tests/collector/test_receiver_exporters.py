"""The receivers against the REAL OpenTelemetry OTLP exporters (gRPC and HTTP) over
loopback: delivery, gzip, retry under overload (RetryInfo / Retry-After), auth, TLS."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from _receiver_support import Metrics, RecordingSink, export_with, make_spans, self_signed_cert
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcExporter,
)
from opentelemetry.exporter.otlp.proto.http import Compression as HttpCompression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
    OTLPSpanExporter as HttpExporter,
)
from opentelemetry.sdk.trace.export import SpanExportResult

from tracepass.collector.config import ReceiverConfig, TLSConfig
from tracepass.collector.receiver import ReceiverServers

pytestmark = pytest.mark.timeout(60)


def _config(**kw: object) -> ReceiverConfig:
    return ReceiverConfig(host="127.0.0.1", grpc_port=0, http_port=0, **kw)  # type: ignore[arg-type]


@pytest.fixture
async def metrics() -> Metrics:
    return Metrics()


async def _serve(
    sink: RecordingSink, metrics: Metrics, **kw: object
) -> AsyncIterator[ReceiverServers]:
    servers = ReceiverServers(sink, metrics.instruments, _config(**kw))
    await servers.start()
    try:
        yield servers
    finally:
        await servers.stop(1.0)


def _span_keys(spans: list) -> set[tuple[bytes, bytes]]:  # type: ignore[type-arg]
    return {
        (s.context.trace_id.to_bytes(16, "big"), s.context.span_id.to_bytes(8, "big"))
        for s in spans
    }


@pytest.mark.parametrize("compression", [grpc.Compression.NoCompression, grpc.Compression.Gzip])
async def test_grpc_exporter_delivers(metrics: Metrics, compression: grpc.Compression) -> None:
    sink = RecordingSink()
    async for servers in _serve(sink, metrics):
        spans = make_spans(3)
        exporter = GrpcExporter(
            endpoint=f"127.0.0.1:{servers.grpc_port}", insecure=True, compression=compression
        )
        result = await asyncio.to_thread(export_with, exporter, spans)
        assert result == SpanExportResult.SUCCESS
        assert sink.received() == _span_keys(spans)
        assert metrics.value("tracepass_spans_received", protocol="grpc") == len(spans)
        assert metrics.value("tracepass_export_requests", protocol="grpc", outcome="ok") == 1


@pytest.mark.parametrize(
    "compression",
    [HttpCompression.NoCompression, HttpCompression.Gzip, HttpCompression.Deflate],
)
async def test_http_exporter_delivers(metrics: Metrics, compression: HttpCompression) -> None:
    sink = RecordingSink()
    async for servers in _serve(sink, metrics):
        spans = make_spans(3)
        exporter = HttpExporter(
            endpoint=f"http://127.0.0.1:{servers.http_port}/v1/traces", compression=compression
        )
        result = await asyncio.to_thread(export_with, exporter, spans)
        assert result == SpanExportResult.SUCCESS
        assert sink.received() == _span_keys(spans)
        assert metrics.value("tracepass_spans_received", protocol="http") == len(spans)


async def test_grpc_exporter_retries_on_overload_with_retry_info(metrics: Metrics) -> None:
    sink = RecordingSink(overloaded_calls=2, retry_after_s=0.05)
    async for servers in _serve(sink, metrics):
        spans = make_spans(2)
        exporter = GrpcExporter(
            endpoint=f"127.0.0.1:{servers.grpc_port}", insecure=True, timeout=60
        )
        result = await asyncio.to_thread(export_with, exporter, spans)
        assert result == SpanExportResult.SUCCESS
        assert sink.calls == 3
        assert sink.received() == _span_keys(spans)
        assert (
            metrics.value("tracepass_export_requests", protocol="grpc", outcome="unavailable") == 2
        )
        assert metrics.value("tracepass_spans_rejected", reason="unavailable") == 2 * len(spans)


async def test_http_exporter_retries_on_overload_with_retry_after(metrics: Metrics) -> None:
    sink = RecordingSink(overloaded_calls=2, retry_after_s=0.05)
    async for servers in _serve(sink, metrics):
        spans = make_spans(2)
        exporter = HttpExporter(
            endpoint=f"http://127.0.0.1:{servers.http_port}/v1/traces", timeout=60
        )
        result = await asyncio.to_thread(export_with, exporter, spans)
        assert result == SpanExportResult.SUCCESS
        assert sink.calls == 3
        assert sink.received() == _span_keys(spans)


async def test_bearer_token_on_both_protocols(metrics: Metrics) -> None:
    sink = RecordingSink()
    async for servers in _serve(sink, metrics, bearer_token="s3cret"):
        spans = make_spans(1)
        auth = {"authorization": "Bearer s3cret"}
        ok_grpc = GrpcExporter(
            endpoint=f"127.0.0.1:{servers.grpc_port}", insecure=True, headers=auth
        )
        ok_http = HttpExporter(
            endpoint=f"http://127.0.0.1:{servers.http_port}/v1/traces", headers=auth
        )
        assert await asyncio.to_thread(export_with, ok_grpc, spans) == SpanExportResult.SUCCESS
        assert await asyncio.to_thread(export_with, ok_http, spans) == SpanExportResult.SUCCESS
        bad = {"authorization": "Bearer nope"}
        bad_grpc = GrpcExporter(
            endpoint=f"127.0.0.1:{servers.grpc_port}", insecure=True, headers=bad
        )
        bad_http = HttpExporter(endpoint=f"http://127.0.0.1:{servers.http_port}/v1/traces")
        assert await asyncio.to_thread(export_with, bad_grpc, spans) == SpanExportResult.FAILURE
        assert await asyncio.to_thread(export_with, bad_http, spans) == SpanExportResult.FAILURE
        assert sink.calls == 2
        for protocol in ("grpc", "http"):
            assert (
                metrics.value(
                    "tracepass_export_requests", protocol=protocol, outcome="unauthorized"
                )
                == 1
            )


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl CLI not installed")
async def test_tls_on_both_protocols(
    metrics: Metrics, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # requests lets these variables override the exporter's certificate_file.
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    cert, key = self_signed_cert(tmp_path)
    sink = RecordingSink()
    tls = TLSConfig(cert_file=cert, key_file=key)
    async for servers in _serve(sink, metrics, tls=tls):
        spans = make_spans(1)
        creds = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
        g = GrpcExporter(endpoint=f"localhost:{servers.grpc_port}", credentials=creds)
        h = HttpExporter(
            endpoint=f"https://localhost:{servers.http_port}/v1/traces",
            certificate_file=str(cert),
        )
        assert await asyncio.to_thread(export_with, g, spans) == SpanExportResult.SUCCESS
        assert await asyncio.to_thread(export_with, h, spans) == SpanExportResult.SUCCESS
        assert sink.calls == 2
