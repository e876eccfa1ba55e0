"""OTLP logs on the wire: `LogsService/Export` and `POST /v1/logs` against the REAL OTel
SDK log exporters (gRPC and HTTP, every compression) and raw clients, through the same
receiver core as traces: auth, TLS, retry hints under overload, partial success, located
errors (JSON field path, protobuf byte offset), size caps, and the `signal` label."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import grpc
import pytest
from _logs_support import export_logs_with, genai_run
from _receiver_support import Metrics, RecordingSink, self_signed_cert, to_otlp_json
from google.protobuf import json_format
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import (
    OTLPLogExporter as GrpcLogExporter,
)
from opentelemetry.exporter.otlp.proto.http import Compression as HttpCompression
from opentelemetry.exporter.otlp.proto.http._log_exporter import (
    OTLPLogExporter as HttpLogExporter,
)
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult

from tracepass.collector.config import ReceiverConfig, TLSConfig
from tracepass.collector.receiver import ReceiverServers

pytestmark = pytest.mark.timeout(60)

PB = {"Content-Type": "application/x-protobuf"}
JS = {"Content-Type": "application/json"}
GRPC_METHOD = "/opentelemetry.proto.collector.logs.v1.LogsService/Export"


@pytest.fixture
def metrics() -> Metrics:
    return Metrics()


async def _serve(
    sink: RecordingSink, metrics: Metrics, **kw: Any
) -> AsyncIterator[ReceiverServers]:
    config = ReceiverConfig(host="127.0.0.1", grpc_port=0, http_port=0, **kw)
    servers = ReceiverServers(sink, metrics.instruments, config)
    await servers.start()
    try:
        yield servers
    finally:
        await servers.stop(1.0)


def _log_keys(requests: Sequence[Any]) -> list[tuple[bytes, bytes, str]]:
    return sorted(
        (r.trace_id, r.span_id, r.event_name)
        for req in requests
        for rl in req.resource_logs
        for sl in rl.scope_logs
        for r in sl.log_records
    )


def _sent_keys(logs: Sequence[ReadableLogRecord]) -> list[tuple[bytes, bytes, str]]:
    return _log_keys([encode_logs(logs)])


def _http(servers: ReceiverServers) -> str:
    return f"http://127.0.0.1:{servers.http_port}/v1/logs"


# ------------------------------------------------------------------ real SDK exporters


@pytest.mark.parametrize("compression", [grpc.Compression.NoCompression, grpc.Compression.Gzip])
async def test_grpc_log_exporter_delivers(metrics: Metrics, compression: grpc.Compression) -> None:
    sink = RecordingSink()
    logs = genai_run().logs
    async for servers in _serve(sink, metrics):
        exporter = GrpcLogExporter(
            endpoint=f"127.0.0.1:{servers.grpc_port}", insecure=True, compression=compression
        )
        assert (
            await asyncio.to_thread(export_logs_with, exporter, logs)
            == LogRecordExportResult.SUCCESS
        )
    assert _log_keys(sink.logs) == _sent_keys(logs)
    assert sink.requests == []
    assert metrics.value("tracepass_log_records_received", protocol="grpc") == len(logs)
    assert metrics.value("tracepass_spans_received") == 0
    ok = {"protocol": "grpc", "signal": "logs", "outcome": "ok"}
    assert metrics.value("tracepass_export_requests", **ok) == 1


@pytest.mark.parametrize(
    "compression",
    [HttpCompression.NoCompression, HttpCompression.Gzip, HttpCompression.Deflate],
)
async def test_http_log_exporter_delivers(metrics: Metrics, compression: HttpCompression) -> None:
    sink = RecordingSink()
    logs = genai_run().logs
    async for servers in _serve(sink, metrics):
        exporter = HttpLogExporter(endpoint=_http(servers), compression=compression)
        assert (
            await asyncio.to_thread(export_logs_with, exporter, logs)
            == LogRecordExportResult.SUCCESS
        )
    assert _log_keys(sink.logs) == _sent_keys(logs)
    assert metrics.value("tracepass_log_records_received", protocol="http") == len(logs)
    ok = {"protocol": "http", "signal": "logs", "outcome": "ok"}
    assert metrics.value("tracepass_export_requests", **ok) == 1


@pytest.mark.parametrize("protocol", ["grpc", "http"])
async def test_log_exporters_retry_on_overload(metrics: Metrics, protocol: str) -> None:
    """503/UNAVAILABLE with Retry-After / RetryInfo: the exporter waits and retries."""
    sink = RecordingSink(overloaded_calls=2, retry_after_s=0.05)
    logs = genai_run(turns=1).logs
    async for servers in _serve(sink, metrics):
        exporter: LogRecordExporter = (
            GrpcLogExporter(endpoint=f"127.0.0.1:{servers.grpc_port}", insecure=True, timeout=60)
            if protocol == "grpc"
            else HttpLogExporter(endpoint=_http(servers), timeout=60)
        )
        assert (
            await asyncio.to_thread(export_logs_with, exporter, logs)
            == LogRecordExportResult.SUCCESS
        )
    assert sink.calls == 3
    assert _log_keys(sink.logs) == _sent_keys(logs)
    refused = {"protocol": protocol, "signal": "logs", "outcome": "unavailable"}
    assert metrics.value("tracepass_export_requests", **refused) == 2
    assert metrics.value("tracepass_log_records_rejected", reason="unavailable") == 2 * len(logs)
    assert metrics.value("tracepass_spans_rejected") == 0


async def test_bearer_token_on_both_protocols(metrics: Metrics) -> None:
    sink = RecordingSink()
    logs = genai_run(turns=1).logs
    async for servers in _serve(sink, metrics, bearer_token="s3cret"):
        grpc_at, http_at = f"127.0.0.1:{servers.grpc_port}", _http(servers)
        for headers, want in (
            ({"authorization": "Bearer s3cret"}, LogRecordExportResult.SUCCESS),
            ({"authorization": "Bearer nope"}, LogRecordExportResult.FAILURE),
        ):
            exporters: list[LogRecordExporter] = [
                GrpcLogExporter(endpoint=grpc_at, insecure=True, headers=headers),
                HttpLogExporter(endpoint=http_at, headers=headers),
            ]
            for exporter in exporters:
                assert await asyncio.to_thread(export_logs_with, exporter, logs) == want
    assert sink.calls == 2
    for protocol in ("grpc", "http"):
        refused = {"protocol": protocol, "signal": "logs", "outcome": "unauthorized"}
        assert metrics.value("tracepass_export_requests", **refused) == 1


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl CLI not installed")
async def test_tls_on_both_protocols(
    metrics: Metrics, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    cert, key = self_signed_cert(tmp_path)
    sink = RecordingSink()
    logs = genai_run(turns=1).logs
    async for servers in _serve(sink, metrics, tls=TLSConfig(cert_file=cert, key_file=key)):
        creds = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
        exporters: list[LogRecordExporter] = [
            GrpcLogExporter(endpoint=f"localhost:{servers.grpc_port}", credentials=creds),
            HttpLogExporter(
                endpoint=f"https://localhost:{servers.http_port}/v1/logs",
                certificate_file=str(cert),
            ),
        ]
        for exporter in exporters:
            result = await asyncio.to_thread(export_logs_with, exporter, logs)
            assert result == LogRecordExportResult.SUCCESS
    assert len(sink.logs) == 2


# ------------------------------------------------------------------ raw clients


@pytest.fixture
async def client() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(auto_decompress=False) as session:
        yield session


async def _status(resp: aiohttp.ClientResponse) -> status_pb2.Status:
    body = await resp.read()
    if resp.content_type == "application/json":
        return json_format.Parse(body, status_pb2.Status())
    return status_pb2.Status.FromString(body)


async def test_partial_success_names_rejected_log_records(
    metrics: Metrics, client: aiohttp.ClientSession
) -> None:
    sink = RecordingSink(reject=2)
    request = genai_run(turns=1).logs_request()
    async for servers in _serve(sink, metrics):
        async with client.post(
            _http(servers), data=request.SerializeToString(), headers=PB
        ) as resp:
            assert resp.status == 200
            body = ExportLogsServiceResponse.FromString(await resp.read())
        assert body.partial_success.rejected_log_records == 2
        assert body.partial_success.error_message == "no ids"
        async with client.post(
            _http(servers), data=json.dumps(to_otlp_json(request)), headers=JS
        ) as resp:
            assert resp.status == 200
            doc = await resp.json()
        assert doc["partialSuccess"]["rejectedLogRecords"] == "2"
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{servers.grpc_port}")
        try:
            raw = await channel.unary_unary(GRPC_METHOD)(request.SerializeToString(), timeout=60)
        finally:
            await channel.close()
        assert ExportLogsServiceResponse.FromString(raw).partial_success.rejected_log_records == 2
    assert sink.logs == [request] * 3
    partial = {"signal": "logs", "outcome": "partial"}
    assert metrics.value("tracepass_export_requests", **partial) == 3


async def test_malformed_logs_json_is_400_with_the_field_path(
    metrics: Metrics, client: aiohttp.ClientSession
) -> None:
    sink = RecordingSink()
    doc = to_otlp_json(genai_run(turns=1).logs_request())
    doc["resourceLogs"][0]["scopeLogs"][0]["logRecords"][2]["spanId"] = "xyz"
    path = "resourceLogs[0].scopeLogs[0].logRecords[2].spanId"
    async for servers in _serve(sink, metrics):
        async with client.post(_http(servers), data=json.dumps(doc), headers=JS) as resp:
            assert resp.status == 400
            assert resp.content_type == "application/json"
            status = await _status(resp)
        assert status.message.startswith(f"invalid OTLP/JSON: {path}: expected 16 hex characters")
        bad = error_details_pb2.BadRequest()
        assert status.details[0].Unpack(bad)
        assert bad.field_violations[0].field == path
        async with client.post(_http(servers), data='{"resourceLogs": [,]}', headers=JS) as resp:
            assert resp.status == 400
            assert "line 1 column 19" in (await _status(resp)).message
        doc = {"resourceLogs": [{"scopeLogs": [{"logRecords": [{"body": {"kvlistValue": 3}}]}]}]}
        async with client.post(_http(servers), data=json.dumps(doc), headers=JS) as resp:
            assert resp.status == 400
            msg = (await _status(resp)).message
            assert "resourceLogs[0].scopeLogs[0].logRecords[0].body.kvlistValue" in msg
    assert sink.calls == 0
    invalid = {"protocol": "http", "signal": "logs", "outcome": "invalid"}
    assert metrics.value("tracepass_export_requests", **invalid) == 3


async def test_a_document_of_the_other_signal_is_400_not_an_empty_success(
    metrics: Metrics, client: aiohttp.ClientSession
) -> None:
    """Unknown keys are ignored, so a traces document posted to /v1/logs (or the reverse)
    would decode as an empty request, be acknowledged and lost: it is refused instead."""
    run = genai_run(turns=1)
    sink = RecordingSink()
    async for servers in _serve(sink, metrics):
        base = f"http://127.0.0.1:{servers.http_port}"
        for path, doc, key, message in (
            ("/v1/logs", run.traces_request(), "resourceSpans", "OTLP traces document, not logs"),
            ("/v1/traces", run.logs_request(), "resourceLogs", "OTLP logs document, not traces"),
        ):
            body = json.dumps(to_otlp_json(doc))
            async with client.post(base + path, data=body, headers=JS) as resp:
                assert resp.status == 400
                status = await _status(resp)
            assert message in status.message
            bad = error_details_pb2.BadRequest()
            assert status.details[0].Unpack(bad)
            assert bad.field_violations[0].field == key
    assert sink.calls == 0


async def test_malformed_logs_protobuf_is_located_on_both_protocols(
    metrics: Metrics, client: aiohttp.ClientSession
) -> None:
    data = genai_run(turns=1).logs_request().SerializeToString()
    truncated = data[:-5]
    async for servers in _serve(RecordingSink(), metrics):
        async with client.post(_http(servers), data=truncated, headers=PB) as resp:
            assert resp.status == 400
            message = (await _status(resp)).message
        assert message.startswith("invalid protobuf ExportLogsServiceRequest:")
        assert "resource_logs[0]" in message
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{servers.grpc_port}")
        try:
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await channel.unary_unary(GRPC_METHOD)(truncated, timeout=60)
        finally:
            await channel.close()
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "ExportLogsServiceRequest" in (info.value.details() or "")
        status = rpc_status.from_call(info.value)
        assert status is not None
        assert status.details
    for protocol in ("grpc", "http"):
        invalid = {"protocol": protocol, "signal": "logs", "outcome": "invalid"}
        assert metrics.value("tracepass_export_requests", **invalid) == 1


async def test_oversized_logs_request_is_413_and_resource_exhausted(
    metrics: Metrics, client: aiohttp.ClientSession
) -> None:
    big = genai_run(turns=30).logs_request().SerializeToString()
    sink = RecordingSink()
    async for servers in _serve(sink, metrics, max_request_bytes=4096):
        assert len(big) > 4096
        async with client.post(_http(servers), data=big, headers=PB) as resp:
            assert resp.status == 413
            assert "4096" in (await _status(resp)).message
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{servers.grpc_port}")
        try:
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await channel.unary_unary(GRPC_METHOD)(big, timeout=60)
        finally:
            await channel.close()
        assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert sink.calls == 0
    for protocol in ("grpc", "http"):
        too_large = {"protocol": protocol, "signal": "logs", "outcome": "too_large"}
        assert metrics.value("tracepass_export_requests", **too_large) == 1


async def test_traces_and_logs_share_one_inflight_budget(
    metrics: Metrics, client: aiohttp.ClientSession
) -> None:
    """A logs request holding the only slot makes a traces request wait for nothing: it
    is refused 429 with Retry-After, like any overload."""
    gate = asyncio.Event()
    sink = RecordingSink(gate=gate)
    run = genai_run(turns=1)
    async for servers in _serve(sink, metrics, max_inflight_requests=1):
        url = _http(servers)
        held = asyncio.create_task(
            client.post(url, data=run.logs_request().SerializeToString(), headers=PB)
        )
        await sink.entered.wait()
        traces = f"http://127.0.0.1:{servers.http_port}/v1/traces"
        async with client.post(
            traces, data=run.traces_request().SerializeToString(), headers=PB
        ) as resp:
            assert resp.status == 429
            assert resp.headers["Retry-After"] == "1"
        gate.set()
        async with await held as resp:
            assert resp.status == 200
    overloaded = {"signal": "traces", "outcome": "overloaded"}
    assert metrics.value("tracepass_export_requests", **overloaded) == 1
