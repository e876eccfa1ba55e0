"""OTLP/HTTP with a raw aiohttp client: encodings, compression, limits, errors, auth,
overload, health, the conversation API and the lifecycle of the ports."""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
import zlib
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from _receiver_support import Metrics, RecordingSink, make_request, span_ids, to_otlp_json
from google.protobuf import json_format
from google.rpc import error_details_pb2, status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from tracepass.collector.api import conversation_routes
from tracepass.collector.config import ReceiverConfig
from tracepass.collector.receiver import ReceiverServers

pytestmark = pytest.mark.timeout(60)

PB = {"Content-Type": "application/x-protobuf"}
JS = {"Content-Type": "application/json"}


class Views:
    def conversation_view(self, conversation_id: str) -> dict[str, Any] | None:
        if conversation_id == "c1":
            return {"conversation_id": "c1", "turns": [], "agent": {"name": "é", "version": None}}
        return None


@pytest.fixture
def metrics() -> Metrics:
    return Metrics()


@pytest.fixture
def sink() -> RecordingSink:
    return RecordingSink()


async def _start(
    sink: RecordingSink, metrics: Metrics, query: Any = None, **kw: Any
) -> ReceiverServers:
    config = ReceiverConfig(host="127.0.0.1", grpc_port=0, http_port=0, grpc_enabled=False, **kw)
    routes = conversation_routes(query) if query is not None else ()
    servers = ReceiverServers(sink, metrics.instruments, config, extra_routes=routes)
    await servers.start()
    return servers


@pytest.fixture
async def server(sink: RecordingSink, metrics: Metrics) -> AsyncIterator[ReceiverServers]:
    servers = await _start(sink, metrics, query=Views(), max_request_bytes=1 << 20)
    yield servers
    await servers.stop(1.0)


@pytest.fixture
async def client() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(auto_decompress=False) as session:
        yield session


def _url(servers: ReceiverServers, path: str = "/v1/traces") -> str:
    return f"http://127.0.0.1:{servers.http_port}{path}"


async def _status(resp: aiohttp.ClientResponse) -> status_pb2.Status:
    body = await resp.read()
    if resp.content_type == "application/json":
        return json_format.Parse(body, status_pb2.Status())
    assert resp.content_type == "application/x-protobuf"
    return status_pb2.Status.FromString(body)


async def test_protobuf_ok(
    server: ReceiverServers, client: aiohttp.ClientSession, sink: RecordingSink
) -> None:
    req = make_request()
    async with client.post(_url(server), data=req.SerializeToString(), headers=PB) as resp:
        assert resp.status == 200
        assert resp.content_type == "application/x-protobuf"
        assert ExportTraceServiceResponse.FromString(await resp.read()) == (
            ExportTraceServiceResponse()
        )
    assert sink.requests == [req]


async def test_json_with_hex_ids(
    server: ReceiverServers, client: aiohttp.ClientSession, sink: RecordingSink
) -> None:
    req = make_request()
    body = json.dumps(to_otlp_json(req))
    async with client.post(_url(server), data=body, headers=JS) as resp:
        assert resp.status == 200, await resp.text()
        assert resp.content_type == "application/json"
        assert await resp.json() == {}
    assert sink.requests == [req]
    assert span_ids(sink.requests[0]) == span_ids(req)


@pytest.mark.parametrize("as_json", [False, True])
async def test_partial_success(
    sink: RecordingSink, metrics: Metrics, client: aiohttp.ClientSession, as_json: bool
) -> None:
    sink.reject = 2
    servers = await _start(sink, metrics)
    try:
        req = make_request()
        data: bytes | str = json.dumps(to_otlp_json(req)) if as_json else req.SerializeToString()
        async with client.post(_url(servers), data=data, headers=JS if as_json else PB) as resp:
            assert resp.status == 200
            if as_json:
                body = await resp.json()
                assert body == {"partialSuccess": {"rejectedSpans": "2", "errorMessage": "no ids"}}
            else:
                parsed = ExportTraceServiceResponse.FromString(await resp.read())
                assert parsed.partial_success.rejected_spans == 2
                assert parsed.partial_success.error_message == "no ids"
        assert metrics.value("tracepass_export_requests", protocol="http", outcome="partial") == 1
    finally:
        await servers.stop(1.0)


@pytest.mark.parametrize(
    ("encoding", "compress"),
    [
        ("gzip", gzip.compress),
        ("deflate", zlib.compress),
        ("deflate", lambda b: zlib.compress(b)[2:-4]),  # raw RFC 1951 stream
        ("gzip", lambda b: gzip.compress(b[:100]) + gzip.compress(b[100:])),  # two members
    ],
)
async def test_compressed_bodies(
    server: ReceiverServers,
    client: aiohttp.ClientSession,
    sink: RecordingSink,
    encoding: str,
    compress: Any,
) -> None:
    req = make_request()
    headers = {**PB, "Content-Encoding": encoding}
    async with client.post(
        _url(server), data=compress(req.SerializeToString()), headers=headers
    ) as resp:
        assert resp.status == 200, await resp.text()
    assert sink.requests == [req]


async def test_gzip_bomb_is_cut_off_at_the_cap(
    server: ReceiverServers, client: aiohttp.ClientSession, sink: RecordingSink, metrics: Metrics
) -> None:
    # 256 MiB of zeros compress to ~250 KiB: under the 1 MiB cap on the wire.
    co = zlib.compressobj(wbits=31)
    block = bytes(1 << 20)
    bomb = b"".join(co.compress(block) for _ in range(256)) + co.flush()
    assert len(bomb) < 1 << 20
    headers = {**PB, "Content-Encoding": "gzip"}
    async with client.post(_url(server), data=bomb, headers=headers) as resp:
        assert resp.status == 413
        status = await _status(resp)
        assert "after decompression" in status.message
    assert sink.calls == 0
    assert metrics.value("tracepass_export_requests", protocol="http", outcome="too_large") == 1


async def test_content_length_over_cap(
    server: ReceiverServers, client: aiohttp.ClientSession
) -> None:
    async with client.post(_url(server), data=bytes(2 << 20), headers=PB) as resp:
        assert resp.status == 413
        assert "Content-Length" in (await _status(resp)).message


async def test_malformed_protobuf_is_located(
    server: ReceiverServers, client: aiohttp.ClientSession
) -> None:
    data = make_request().SerializeToString()
    at = data.index(b"execute_tool get_weather")
    data = data[:at] + b"\xff" + data[at + 1 :]  # invalid UTF-8 inside a span name
    async with client.post(_url(server), data=data, headers=PB) as resp:
        assert resp.status == 400
        status = await _status(resp)
        assert status.message.startswith("invalid protobuf ExportTraceServiceRequest:")
        assert f"string is not valid UTF-8 at byte {at} in " in status.message
        assert "resource_spans[0].scope_spans[0].spans[" in status.message
        assert "].name" in status.message
    async with client.post(_url(server), data=data[:-7], headers=PB) as resp:
        assert "runs past the end of its container" in (await _status(resp)).message
        bad = error_details_pb2.BadRequest()
        assert any(d.Unpack(bad) for d in status.details)


async def test_malformed_json_line_and_column(
    server: ReceiverServers, client: aiohttp.ClientSession
) -> None:
    async with client.post(_url(server), data='{\n "resourceSpans": [,]}', headers=JS) as resp:
        assert resp.status == 400
        assert resp.content_type == "application/json"
        body = await resp.json()
        assert "line 2 column 20" in body["message"]


async def test_bad_trace_id_path_in_json(
    server: ReceiverServers, client: aiohttp.ClientSession
) -> None:
    doc = to_otlp_json(make_request())
    doc["resourceSpans"][0]["scopeSpans"][0]["spans"][3]["traceId"] = "abc"
    async with client.post(_url(server), data=json.dumps(doc), headers=JS) as resp:
        assert resp.status == 400
        status = await _status(resp)
        assert (
            status.message == "invalid OTLP/JSON: resourceSpans[0].scopeSpans[0].spans[3].traceId: "
            "expected 32 hex characters (16 bytes), got 3 characters 'abc'"
        )
        bad = error_details_pb2.BadRequest()
        assert status.details[0].Unpack(bad)
        assert bad.field_violations[0].field == "resourceSpans[0].scopeSpans[0].spans[3].traceId"


async def test_corrupt_gzip(server: ReceiverServers, client: aiohttp.ClientSession) -> None:
    data = gzip.compress(b"x" * 1000)[:-20]
    headers = {**PB, "Content-Encoding": "gzip"}
    async with client.post(_url(server), data=data, headers=headers) as resp:
        assert resp.status == 400
        assert "truncated gzip stream" in (await _status(resp)).message


@pytest.mark.parametrize(
    ("headers", "needle"),
    [
        ({"Content-Type": "text/plain"}, "unsupported Content-Type"),
        ({**PB, "Content-Encoding": "br"}, "unsupported Content-Encoding"),
    ],
)
async def test_unsupported_media(
    server: ReceiverServers, client: aiohttp.ClientSession, headers: dict[str, str], needle: str
) -> None:
    async with client.post(_url(server), data=b"x", headers=headers) as resp:
        assert resp.status == 415
        assert needle in (await _status(resp)).message


async def test_empty_request_is_success(
    server: ReceiverServers, client: aiohttp.ClientSession, sink: RecordingSink
) -> None:
    async with client.post(_url(server), data=b"", headers=PB) as resp:
        assert resp.status == 200
    async with client.post(_url(server), data="{}", headers=JS) as resp:
        assert resp.status == 200
    assert sink.calls == 0


async def test_bearer_token(
    sink: RecordingSink, metrics: Metrics, client: aiohttp.ClientSession
) -> None:
    servers = await _start(sink, metrics, query=Views(), bearer_token="tok")
    try:
        data = make_request().SerializeToString()
        async with client.post(_url(servers), data=data, headers=PB) as resp:
            assert resp.status == 401
            assert resp.headers["WWW-Authenticate"].startswith("Bearer")
            assert "missing bearer token" in (await _status(resp)).message
        bad = {**PB, "Authorization": "Bearer wrong"}
        async with client.post(_url(servers), data=data, headers=bad) as resp:
            assert resp.status == 401
        good = {**PB, "Authorization": "Bearer tok"}
        async with client.post(_url(servers), data=data, headers=good) as resp:
            assert resp.status == 200
        async with client.get(_url(servers, "/api/v1/conversations/c1")) as resp:
            assert resp.status == 401
            # Browsers (the web UI) are offered Basic, with the token as the password, in
            # a header of its own (Chromium ignores a Basic challenge after a Bearer one).
            challenges = resp.headers.getall("WWW-Authenticate")
            assert challenges == [
                'Basic realm="tracepass", charset="UTF-8"',
                'Bearer realm="tracepass"',
            ]
        for user_token, status in ((b"ui:tok", 200), (b":tok", 200), (b"ui:wrong", 401)):
            basic = {"Authorization": "Basic " + base64.b64encode(user_token).decode()}
            async with client.get(_url(servers, "/api/v1/conversations/c1"), headers=basic) as resp:
                assert resp.status == status, user_token
        async with client.get(_url(servers, "/healthz")) as resp:
            assert resp.status == 200  # health stays open
        assert metrics.value("tracepass_export_requests", outcome="unauthorized") == 2
    finally:
        await servers.stop(1.0)


async def test_inflight_cap_answers_429_with_retry_after(
    sink: RecordingSink, metrics: Metrics, client: aiohttp.ClientSession
) -> None:
    sink.gate = asyncio.Event()
    servers = await _start(sink, metrics, max_inflight_requests=1, retry_after_s=2.5)
    try:
        data = make_request().SerializeToString()
        first = asyncio.create_task(client.post(_url(servers), data=data, headers=PB))
        await asyncio.wait_for(sink.entered.wait(), 10)
        async with client.post(_url(servers), data=data, headers=PB) as resp:
            assert resp.status == 429
            assert resp.headers["Retry-After"] == "3"
            status = await _status(resp)
            info = error_details_pb2.RetryInfo()
            assert status.details[0].Unpack(info)
            assert (info.retry_delay.seconds, info.retry_delay.nanos) == (2, 500_000_000)
        sink.gate.set()
        resp1 = await first
        assert resp1.status == 200
        resp1.release()
        assert metrics.value("tracepass_export_requests", outcome="overloaded") == 1
    finally:
        await servers.stop(1.0)


async def test_sink_overloaded_is_503(
    sink: RecordingSink, metrics: Metrics, client: aiohttp.ClientSession
) -> None:
    sink.overloaded_calls = 1
    sink.retry_after_s = 0.2
    servers = await _start(sink, metrics)
    try:
        req = make_request()
        async with client.post(_url(servers), data=req.SerializeToString(), headers=PB) as resp:
            assert resp.status == 503
            assert resp.headers["Retry-After"] == "1"
            assert "queue full (test)" in (await _status(resp)).message
        n = len(span_ids(req))
        assert metrics.value("tracepass_spans_rejected", reason="unavailable") == n
    finally:
        await servers.stop(1.0)


async def test_sink_failure_is_500(
    sink: RecordingSink, metrics: Metrics, client: aiohttp.ClientSession
) -> None:
    sink.fail = True
    servers = await _start(sink, metrics)
    try:
        req = make_request()
        async with client.post(_url(servers), data=req.SerializeToString(), headers=PB) as resp:
            assert resp.status == 500
            assert "RuntimeError" in (await _status(resp)).message
        assert metrics.value("tracepass_export_requests", outcome="error") == 1
    finally:
        await servers.stop(1.0)


async def test_health_ready_and_conversations(
    server: ReceiverServers, client: aiohttp.ClientSession, sink: RecordingSink
) -> None:
    async with client.get(_url(server, "/healthz")) as resp:
        assert resp.status == 200
    async with client.get(_url(server, "/readyz")) as resp:
        assert resp.status == 200
    sink.is_ready = False
    async with client.get(_url(server, "/readyz")) as resp:
        assert resp.status == 503
    async with client.get(_url(server, "/api/v1/conversations/c1")) as resp:
        assert resp.status == 200
        assert (await resp.json())["agent"]["name"] == "é"
    async with client.get(_url(server, "/api/v1/conversations/nope")) as resp:
        assert resp.status == 404
        assert resp.content_type == "application/json"
        assert "not found" in (await resp.json())["error"]


async def test_a_bare_receiver_serves_no_read_api(
    sink: RecordingSink, metrics: Metrics, client: aiohttp.ClientSession
) -> None:
    """The conversation API is mounted by the service (`tracepass.collector.api`); a
    receiver used alone answers only OTLP and health checks."""
    servers = await _start(sink, metrics)
    try:
        async with client.get(_url(servers, "/api/v1/conversations/c1")) as resp:
            assert resp.status == 404
    finally:
        await servers.stop(1.0)


async def test_stop_drains_inflight_then_closes_ports(
    sink: RecordingSink, metrics: Metrics, client: aiohttp.ClientSession
) -> None:
    sink.gate = asyncio.Event()
    config = ReceiverConfig(host="127.0.0.1", grpc_port=0, http_port=0)
    servers = ReceiverServers(sink, metrics.instruments, config)
    await servers.start()
    http_port, grpc_port = servers.http_port, servers.grpc_port
    assert http_port not in (None, 4318)
    assert grpc_port not in (None, 4317)
    data = make_request().SerializeToString()
    pending = asyncio.create_task(client.post(_url(servers), data=data, headers=PB))
    await asyncio.wait_for(sink.entered.wait(), 10)
    stopping = asyncio.create_task(servers.stop(5.0))
    await asyncio.sleep(0.05)
    assert not stopping.done()  # waits for the running request
    sink.gate.set()
    resp = await pending
    assert resp.status == 200
    resp.release()
    await asyncio.wait_for(stopping, 10)
    for port in (http_port, grpc_port):
        with pytest.raises(ConnectionRefusedError):
            await asyncio.open_connection("127.0.0.1", port)
