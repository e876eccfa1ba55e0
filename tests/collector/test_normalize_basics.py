"""OTLP value conversion, id validation and the span builders the other normalize tests use."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, Span, Status

from tracepass.collector.normalize import RecordKind, normalize_request
from tracepass.collector.normalize.anyvalue import any_value, attributes_to_dict

TRACE = bytes.fromhex("0af7651916cd43dd8448eb211c80319c")
TRACE_HEX = TRACE.hex()


def to_any(value: Any) -> AnyValue:
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, str):
        return AnyValue(string_value=value)
    if isinstance(value, bytes):
        return AnyValue(bytes_value=value)
    if isinstance(value, list | tuple):
        out = AnyValue()
        out.array_value.values.extend(to_any(v) for v in value)
        return out
    if isinstance(value, Mapping):
        out = AnyValue()
        out.kvlist_value.values.extend(KeyValue(key=k, value=to_any(v)) for k, v in value.items())
        return out
    if value is None:
        return AnyValue()
    raise TypeError(type(value))


def kvs(attrs: Mapping[str, Any]) -> list[KeyValue]:
    return [
        KeyValue(
            key=k,
            value=to_any(
                json.dumps(v)
                if isinstance(v, list | dict) and k.endswith(("messages", ".arguments", ".result"))
                else v
            ),
        )
        for k, v in attrs.items()
    ]


def make_span(
    name: str,
    attrs: Mapping[str, Any] | None = None,
    *,
    span_id: int | bytes = 1,
    parent: int | bytes | None = None,
    trace_id: bytes = TRACE,
    error: str | None = None,
    start: int = 1_000,
    end: int = 2_000,
) -> Span:
    """A protobuf span; list/dict values of `*messages`/`*.arguments`/`*.result` keys are
    JSON-encoded as instrumentations do, other lists/dicts become OTLP arrays/kvlists."""
    sid = span_id if isinstance(span_id, bytes) else span_id.to_bytes(8, "big")
    span = Span(
        trace_id=trace_id,
        span_id=sid,
        name=name,
        start_time_unix_nano=start,
        end_time_unix_nano=end,
    )
    if parent is not None:
        span.parent_span_id = parent if isinstance(parent, bytes) else parent.to_bytes(8, "big")
    span.attributes.extend(kvs(attrs or {}))
    if error is not None:
        span.status.CopyFrom(Status(code=Status.STATUS_CODE_ERROR, message=error))
    return span


def make_request(
    *spans: Span, resource: Mapping[str, Any] | None = None, scope: str = ""
) -> ExportTraceServiceRequest:
    """One request of `spans` under one instrumentation scope (`scope`: its name, which
    decides the framework adapters that apply)."""
    rs = ResourceSpans()
    rs.resource.attributes.extend(kvs(resource or {"service.name": "svc"}))
    scoped = rs.scope_spans.add()
    scoped.scope.name = scope
    scoped.spans.extend(spans)
    return ExportTraceServiceRequest(resource_spans=[rs])


def hexid(n: int) -> str:
    return n.to_bytes(8, "big").hex()


# --------------------------------------------------------------------------- AnyValue


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("text", "text"),
        (42, 42),
        (-(2**63), -(2**63)),
        (True, True),
        (1.5, 1.5),
        (None, None),
        (b"\x00\xff", base64.b64encode(b"\x00\xff").decode()),
        (["a", 1, [True]], ["a", 1, [True]]),
        ({"k": {"n": [1.0]}}, {"k": {"n": [1.0]}}),
    ],
)
def test_any_value_converts_every_kind(value: Any, expected: Any) -> None:
    assert any_value(to_any(value)) == expected


def test_attributes_last_duplicate_wins() -> None:
    attrs = attributes_to_dict(
        [KeyValue(key="a", value=to_any(1)), KeyValue(key="a", value=to_any("two"))]
    )
    assert attrs == {"a": "two"}


# --------------------------------------------------------------------------- ids


def test_ids_are_lowercase_hex_and_parent_links_kept() -> None:
    records, rejections = normalize_request(
        make_request(make_span("root", span_id=1), make_span("child", span_id=2, parent=1))
    )
    assert rejections == []
    root, child = records
    assert root.trace_id == TRACE_HEX
    assert root.span_id == hexid(1)
    assert root.parent_span_id is None
    assert child.parent_span_id == hexid(1)
    assert (child.start_ns, child.end_ns) == (1_000, 2_000)
    assert root.kind is RecordKind.OTHER


@pytest.mark.parametrize(
    ("trace_id", "span_id", "parent", "reason"),
    [
        (bytes(16), 1, None, "invalid_trace_id"),
        (b"\x01" * 8, 1, None, "invalid_trace_id"),
        (b"", 1, None, "invalid_trace_id"),
        (TRACE, bytes(8), None, "invalid_span_id"),
        (TRACE, b"\x01" * 16, None, "invalid_span_id"),
        (TRACE, b"", None, "invalid_span_id"),
        (TRACE, 1, b"\x01\x02", "invalid_parent_span_id"),
    ],
)
def test_invalid_ids_are_rejected_with_reason(
    trace_id: bytes, span_id: int | bytes, parent: bytes | None, reason: str
) -> None:
    good = make_span("ok", span_id=7)
    bad = make_span("bad", span_id=span_id, trace_id=trace_id, parent=parent)
    records, rejections = normalize_request(make_request(good, bad))
    assert [r.name for r in records] == ["ok"]
    assert len(rejections) == 1
    assert rejections[0].reason == reason
    assert "bytes" in rejections[0].message


def test_all_zero_parent_is_a_root() -> None:
    records, _ = normalize_request(make_request(make_span("r", parent=bytes(8))))
    assert records[0].parent_span_id is None


def test_unknown_spans_keep_service_and_version() -> None:
    records, _ = normalize_request(
        make_request(make_span("x"), resource={"service.name": "shop", "service.version": "2.0"})
    )
    (rec,) = records
    assert (rec.service_name, rec.agent_name, rec.agent_version) == ("shop", "shop", "2.0")
    assert rec.conversation_id is None
    assert rec.attributes == {}
