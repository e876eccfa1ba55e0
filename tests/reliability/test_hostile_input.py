"""Issue 13 #4 and #2: malformed input is a 400 / INVALID_ARGUMENT that is counted in
`tracepass_export_requests_total`, never a 500 / UNKNOWN; and nothing is acknowledged
that could not be decoded again from the state file (stored as protobuf, decoded by upb
with its 100-level depth limit)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import grpc
import pytest
from _fuzz import wire_field
from _receiver_support import Metrics, RecordingSink
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracepass.collector.config import ReceiverConfig
from tracepass.collector.receiver import ReceiverServers

pytestmark = pytest.mark.timeout(60)

METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
JS = {"Content-Type": "application/json"}
PB = {"Content-Type": "application/x-protobuf"}


@pytest.fixture
def metrics() -> Metrics:
    return Metrics()


@pytest.fixture
def sink() -> RecordingSink:
    return RecordingSink()


@pytest.fixture
async def servers(sink: RecordingSink, metrics: Metrics) -> AsyncIterator[ReceiverServers]:
    config = ReceiverConfig(host="127.0.0.1", grpc_port=0, http_port=0)
    s = ReceiverServers(sink, metrics.instruments, config)
    await s.start()
    yield s
    await s.stop(1.0)


def _doc(span: dict[str, Any]) -> dict[str, Any]:
    return {"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}


_IDS = {"traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "b7ad6b7169203331"}


def _nested_any(kind: str, levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {"stringValue": "leaf"}
    for _ in range(levels):
        if kind == "kvlist":
            value = {"kvlistValue": {"values": [{"key": "k", "value": value}]}}
        else:
            value = {"arrayValue": {"values": [value]}}
    return value


# Each of these was answered 500 and went uncounted before the fix.
HOSTILE_JSON: dict[str, bytes] = {
    "superscript digit in an integer string": json.dumps(
        _doc({**_IDS, "name": "s", "startTimeUnixNano": "²"})
    ).encode(),
    "superscript digit in intValue": json.dumps(
        _doc({**_IDS, "attributes": [{"key": "k", "value": {"intValue": "1²"}}]})
    ).encode(),
    "integer string of 5000 digits": json.dumps(
        _doc({**_IDS, "endTimeUnixNano": "9" * 5000})
    ).encode(),
    "start time beyond uint64 as a JSON number (found by the fuzz)": json.dumps(
        _doc({**_IDS, "startTimeUnixNano": 10**400})
    ).encode(),
    "doubleValue beyond the double range (found by the fuzz)": json.dumps(
        _doc({**_IDS, "attributes": [{"key": "d", "value": {"doubleValue": 10**400}}]})
    ).encode(),
    "integer literal of 5000 digits": (
        b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"flags":' + b"7" * 5000 + b"}]}]}]}"
    ),
    "lone surrogate in a span name": (
        b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"\\ud800"}]}]}]}'
    ),
    "lone surrogate in an attribute key": (
        b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"attributes":'
        b'[{"key":"\\udfff","value":{"stringValue":"v"}}]}]}]}]}'
    ),
    "lone surrogate in an attribute value": (
        b'{"resourceSpans":[{"resource":{"attributes":'
        b'[{"key":"k","value":{"stringValue":"a\\ud800"}}]}}]}'
    ),
    "lone surrogate in a scope name": (
        b'{"resourceSpans":[{"scopeSpans":[{"scope":{"name":"\\ud801"}}]}]}'
    ),
    "JSON nested 100,000 deep": b"[" * 100_000 + b"]" * 100_000,
    "object nesting 5,000 deep in an unknown key": (
        b'{"x":' + b'{"a":' * 5000 + b"1" + b"}" * 5001
    ),
}


def _attribute_doc(where: str, value: dict[str, Any]) -> dict[str, Any]:
    """The value as an attribute in each place OTLP has attributes."""
    attrs = [{"key": "deep", "value": value}]
    span: dict[str, Any] = {**_IDS, "name": "s"}
    rs: dict[str, Any] = {"scopeSpans": [{"spans": [span]}]}
    if where == "resource":
        rs["resource"] = {"attributes": attrs}
    elif where == "scope":
        rs["scopeSpans"][0]["scope"] = {"attributes": attrs}
    elif where == "span":
        span["attributes"] = attrs
    elif where == "event":
        span["events"] = [{"name": "e", "attributes": attrs}]
    else:
        span["links"] = [{**_IDS, "attributes": attrs}]
    return {"resourceSpans": [rs]}


def _deep_protobuf_any_value(levels: int) -> bytes:
    """A request whose span attribute is an arrayValue nested `levels` deep."""
    field = wire_field
    value = field(1, b"leaf")  # AnyValue.string_value
    for _ in range(levels):
        value = field(5, field(1, value))  # AnyValue.array_value → ArrayValue.values
    key_value = field(1, b"k") + field(2, value)
    return field(1, field(2, field(2, field(9, key_value))))


async def _post(servers: ReceiverServers, body: bytes, headers: dict[str, str]) -> int:
    async with aiohttp.ClientSession() as session:
        url = f"http://127.0.0.1:{servers.http_port}/v1/traces"
        async with session.post(url, data=body, headers=headers) as resp:
            await resp.read()
            return resp.status


HOSTILE_LOGS_JSON: dict[str, bytes] = {
    "lone surrogate in a log body": (
        b'{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"stringValue":"\\ud800"}}]}]}]}'
    ),
    "lone surrogate in severityText": (
        b'{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"severityText":"\\udc00"}]}]}]}'
    ),
    "superscript digit in timeUnixNano": (
        b'{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"timeUnixNano":"\xc2\xb2"}]}]}]}'
    ),
    "log attribute nested 32 kvlist levels": json.dumps(
        {
            "resourceLogs": [
                {"scopeLogs": [{"logRecords": [{"attributes": [{"key": "k", "value": {}}]}]}]}
            ]
        }
    )
    .replace('"value": {}', '"value": ' + json.dumps(_nested_any("kvlist", 32)))
    .encode(),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_LOGS_JSON))
async def test_hostile_logs_json_is_400_and_counted(
    servers: ReceiverServers, metrics: Metrics, case: str
) -> None:
    async with aiohttp.ClientSession() as session:
        url = f"http://127.0.0.1:{servers.http_port}/v1/logs"
        async with session.post(url, data=HOSTILE_LOGS_JSON[case], headers=JS) as resp:
            assert resp.status == 400, await resp.text()
    assert metrics.value("tracepass_export_requests", outcome="invalid", signal="logs") == 1


@pytest.mark.parametrize("case", sorted(HOSTILE_JSON))
async def test_hostile_json_is_400_and_counted(
    servers: ReceiverServers, metrics: Metrics, sink: RecordingSink, case: str
) -> None:
    assert await _post(servers, HOSTILE_JSON[case], JS) == 400
    assert metrics.value("tracepass_export_requests", outcome="invalid") == 1
    assert metrics.value("tracepass_export_requests") == 1
    assert sink.calls == 0


async def test_protobuf_any_value_10000_deep_is_400_and_invalid_argument(
    servers: ReceiverServers, metrics: Metrics
) -> None:
    body = _deep_protobuf_any_value(10_000)
    assert await _post(servers, body, PB) == 400
    async with grpc.aio.insecure_channel(f"127.0.0.1:{servers.grpc_port}") as channel:
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await channel.unary_unary(METHOD)(body, timeout=60)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "nested deeper than 100 levels" in (info.value.details() or "")
    assert metrics.value("tracepass_export_requests", outcome="invalid") == 2
    assert metrics.value("tracepass_export_requests") == 2


@pytest.mark.parametrize("where", ["resource", "scope", "span", "event", "link"])
@pytest.mark.parametrize(("kind", "deepest"), [("kvlist", 31), ("array", 46)])
async def test_acknowledged_values_decode_again_and_deeper_ones_are_refused(
    servers: ReceiverServers, sink: RecordingSink, where: str, kind: str, deepest: int
) -> None:
    """#2: the deepest accepted value survives the protobuf round trip the state file
    makes; one level more is refused before it is acknowledged."""
    ok = json.dumps(_attribute_doc(where, _nested_any(kind, deepest))).encode()
    assert await _post(servers, ok, JS) == 200
    (stored,) = sink.requests
    assert ExportTraceServiceRequest.FromString(stored.SerializeToString()) == stored
    too_deep = json.dumps(_attribute_doc(where, _nested_any(kind, deepest + 1))).encode()
    assert await _post(servers, too_deep, JS) == 400
    assert len(sink.requests) == 1


async def test_mixed_nesting_never_acknowledges_what_cannot_be_decoded(
    servers: ReceiverServers, sink: RecordingSink
) -> None:
    """Alternating kvlist and array levels: whatever is accepted decodes again."""
    for levels in range(20, 60):
        value: dict[str, Any] = {"stringValue": "leaf"}
        for i in range(levels):
            value = (
                {"kvlistValue": {"values": [{"key": "k", "value": value}]}}
                if i % 2
                else {"arrayValue": {"values": [value]}}
            )
        status = await _post(servers, json.dumps(_attribute_doc("event", value)).encode(), JS)
        assert status in (200, 400)
    for stored in sink.requests:
        assert ExportTraceServiceRequest.FromString(stored.SerializeToString()) == stored
    assert sink.requests, "some shallow ones must have been accepted"
