"""Issue 13 #6: slow clients cannot lock everyone out. Bodies are read before an
in-flight slot is taken and under a deadline (408), open connections are capped (503),
and a connection that never completes its headers is closed."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator

import pytest
from _receiver_support import Metrics, RecordingSink, export_with, make_spans, span_ids
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from tracepass.collector.config import ReceiverConfig
from tracepass.collector.receiver import ReceiverServers

pytestmark = pytest.mark.timeout(60)


async def _start(sink: RecordingSink, metrics: Metrics, **kw: object) -> ReceiverServers:
    config = ReceiverConfig.model_validate(
        {"host": "127.0.0.1", "grpc_port": 0, "http_port": 0, "grpc_enabled": False, **kw}
    )
    servers = ReceiverServers(sink, metrics.instruments, config)
    await servers.start()
    return servers


@pytest.fixture
async def slow_sockets() -> AsyncIterator[list[socket.socket]]:
    socks: list[socket.socket] = []
    yield socks
    for s in socks:
        s.close()


def _open(port: int, payload: bytes) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(payload)
    return s


def _slow_body_request(port: int) -> bytes:
    return (
        f"POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        "Content-Type: application/x-protobuf\r\nContent-Length: 100000\r\n\r\n"
    ).encode() + b"\n"  # headers and one byte of a 100 kB body, then nothing


def _read_all(s: socket.socket) -> bytes:
    s.settimeout(60)
    out = b""
    while chunk := s.recv(65536):
        out += chunk
    return out


async def test_64_slow_bodies_do_not_lock_out_a_real_exporter(
    slow_sockets: list[socket.socket],
) -> None:
    sink, metrics = RecordingSink(), Metrics()
    servers = await _start(sink, metrics, max_inflight_requests=64, body_timeout_s=3.0)
    try:
        port = servers.http_port
        assert port is not None
        for _ in range(64):
            slow_sockets.append(await asyncio.to_thread(_open, port, _slow_body_request(port)))
        await asyncio.sleep(0.3)
        spans = make_spans(2)
        exporter = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{port}/v1/traces", timeout=60)
        result = await asyncio.to_thread(export_with, exporter, spans)
        assert result == SpanExportResult.SUCCESS
        # Never refused for want of a slot (the exporter's generous timeout is for a
        # loaded machine; a 429 and a retry would mean it was locked out).
        assert metrics.value("tracepass_export_requests", outcome="overloaded") == 0
        assert sink.received() == {
            (s.context.trace_id.to_bytes(16, "big"), s.context.span_id.to_bytes(8, "big"))
            for s in spans
        }
        # The trickling clients are cut off at the body deadline with 408, and counted.
        answers = await asyncio.gather(*(asyncio.to_thread(_read_all, s) for s in slow_sockets))
        assert all(a.startswith(b"HTTP/1.1 408") for a in answers), answers[0][:200]
        assert metrics.value("tracepass_export_requests", outcome="timeout") == 64
        assert metrics.value("tracepass_export_requests", outcome="ok") == 1
        assert span_ids(sink.requests[0])
    finally:
        await servers.stop(1.0)


async def test_stalled_headers_are_closed_and_connections_are_capped(
    slow_sockets: list[socket.socket],
) -> None:
    sink, metrics = RecordingSink(), Metrics()
    servers = await _start(sink, metrics, max_connections=8, header_timeout_s=1.0)
    try:
        port = servers.http_port
        assert port is not None
        partial = b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Ty"
        for _ in range(8):
            slow_sockets.append(await asyncio.to_thread(_open, port, partial))
        await asyncio.sleep(0.2)
        extra = await asyncio.to_thread(_open, port, b"")
        slow_sockets.append(extra)
        answer = await asyncio.to_thread(_read_all, extra)
        assert answer.startswith(b"HTTP/1.1 503"), answer
        assert b"Retry-After: 1" in answer
        # Within the header deadline the stalled connections are closed by the server.
        closed = await asyncio.gather(*(asyncio.to_thread(_read_all, s) for s in slow_sockets[:8]))
        assert closed == [b""] * 8
        exporter = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{port}/v1/traces", timeout=60)
        result = await asyncio.to_thread(export_with, exporter, make_spans(1))
        assert result == SpanExportResult.SUCCESS
    finally:
        await servers.stop(1.0)
