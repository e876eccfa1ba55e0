"""OTLP/gRPC with a raw grpc.aio client: status codes, RetryInfo, partial success."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest
from _receiver_support import Metrics, RecordingSink, make_request
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from tracepass.collector.config import ReceiverConfig
from tracepass.collector.receiver import ReceiverServers

pytestmark = pytest.mark.timeout(60)

METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


@pytest.fixture
def metrics() -> Metrics:
    return Metrics()


async def _servers(sink: RecordingSink, metrics: Metrics, **kw: object) -> ReceiverServers:
    config = ReceiverConfig(
        host="127.0.0.1",
        grpc_port=0,
        http_port=0,
        http_enabled=False,
        **kw,  # type: ignore[arg-type]
    )
    servers = ReceiverServers(sink, metrics.instruments, config)
    await servers.start()
    assert servers.http_port is None
    return servers


@pytest.fixture
async def channel_for() -> AsyncIterator[list[grpc.aio.Channel]]:
    channels: list[grpc.aio.Channel] = []
    yield channels
    for ch in channels:
        await ch.close()


async def _call(
    servers: ReceiverServers,
    channels: list[grpc.aio.Channel],
    data: bytes,
    metadata: tuple[tuple[str, str], ...] = (),
    compression: grpc.Compression | None = None,
) -> bytes:
    ch = grpc.aio.insecure_channel(
        f"127.0.0.1:{servers.grpc_port}",
        options=[("grpc.max_send_message_length", 64 << 20)],
        compression=compression,
    )
    channels.append(ch)
    stub = ch.unary_unary(METHOD)
    result: bytes = await stub(data, metadata=metadata, timeout=60)
    return result


async def test_ok_and_partial_success(
    metrics: Metrics, channel_for: list[grpc.aio.Channel]
) -> None:
    sink = RecordingSink(reject=1)
    servers = await _servers(sink, metrics)
    try:
        req = make_request()
        raw = await _call(servers, channel_for, req.SerializeToString())
        resp = ExportTraceServiceResponse.FromString(raw)
        assert resp.partial_success.rejected_spans == 1
        assert resp.partial_success.error_message == "no ids"
        assert sink.requests == [req]
    finally:
        await servers.stop(1.0)


async def test_invalid_argument_with_location(
    metrics: Metrics, channel_for: list[grpc.aio.Channel]
) -> None:
    servers = await _servers(RecordingSink(), metrics)
    try:
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await _call(servers, channel_for, b"\x0a\x05\x12\x10abc")
        err = info.value
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert (
            "length 16 runs past the end of its container (3 bytes left) at byte 2 in resource_spans[0].scope_spans[0]"
            in (err.details() or "")
        )
        assert metrics.value("tracepass_export_requests", protocol="grpc", outcome="invalid") == 1
    finally:
        await servers.stop(1.0)


@pytest.mark.parametrize("compression", [None, grpc.Compression.Gzip])
async def test_too_large_is_resource_exhausted(
    metrics: Metrics, channel_for: list[grpc.aio.Channel], compression: grpc.Compression | None
) -> None:
    servers = await _servers(RecordingSink(), metrics, max_request_bytes=64 * 1024)
    try:
        # A valid request whose decompressed size is over the cap (compresses to ~1 KiB).
        req = make_request()
        req.resource_spans[0].scope_spans[0].spans[0].name = "x" * (1 << 20)
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await _call(servers, channel_for, req.SerializeToString(), compression=compression)
        assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        # grpc refuses the message itself; the client-streaming handler still counts it.
        assert metrics.value("tracepass_export_requests", protocol="grpc", outcome="too_large") == 1
        # The receiver still serves requests under the cap afterwards.
        await _call(servers, channel_for, make_request().SerializeToString())
        assert metrics.value("tracepass_export_requests", protocol="grpc", outcome="ok") == 1
    finally:
        await servers.stop(1.0)


async def test_export_takes_exactly_one_message(
    metrics: Metrics, channel_for: list[grpc.aio.Channel]
) -> None:
    """A streaming client is not an OTLP exporter, but it must get a precise answer."""
    servers = await _servers(RecordingSink(), metrics)
    try:
        ch = grpc.aio.insecure_channel(f"127.0.0.1:{servers.grpc_port}")
        channel_for.append(ch)
        stream = ch.stream_unary(METHOD)
        data = make_request().SerializeToString()

        async def messages(n: int) -> AsyncIterator[bytes]:
            for _ in range(n):
                yield data

        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stream(messages(2), timeout=60)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "more than one request message" in (info.value.details() or "")
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stream(messages(0), timeout=60)
        assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "or the client sent no message" in (info.value.details() or "")
        assert metrics.value("tracepass_export_requests", protocol="grpc", outcome="invalid") == 1
        assert metrics.value("tracepass_export_requests", protocol="grpc", outcome="too_large") == 1
    finally:
        await servers.stop(1.0)


async def test_overloaded_carries_retry_info(
    metrics: Metrics, channel_for: list[grpc.aio.Channel]
) -> None:
    sink = RecordingSink(overloaded_calls=1, retry_after_s=1.25)
    servers = await _servers(sink, metrics)
    try:
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await _call(servers, channel_for, make_request().SerializeToString())
        err = info.value
        assert err.code() == grpc.StatusCode.UNAVAILABLE
        trailers = dict(err.trailing_metadata() or ())
        status = rpc_status.from_call(err)  # type: ignore[arg-type]
        assert status is not None
        assert status.code == grpc.StatusCode.UNAVAILABLE.value[0]
        retry = error_details_pb2.RetryInfo()
        assert status.details[0].Unpack(retry)
        assert (retry.retry_delay.seconds, retry.retry_delay.nanos) == (1, 250_000_000)
        # The Python OTel exporter reads this separate trailer.
        legacy = error_details_pb2.RetryInfo.FromString(trailers["google.rpc.retryinfo-bin"])
        assert legacy == retry
    finally:
        await servers.stop(1.0)


async def test_unauthenticated(metrics: Metrics, channel_for: list[grpc.aio.Channel]) -> None:
    servers = await _servers(RecordingSink(), metrics, bearer_token="tok")
    try:
        data = make_request().SerializeToString()
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await _call(servers, channel_for, data)
        assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
        await _call(servers, channel_for, data, metadata=(("authorization", "Bearer tok"),))
    finally:
        await servers.stop(1.0)
