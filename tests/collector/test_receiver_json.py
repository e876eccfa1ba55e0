"""The OTLP/JSON decoder: equivalence with protobuf, OTLP deviations from proto3 JSON
(hex ids), lenient forms (int64 strings, enum names, snake_case, unknown keys), and
error messages with exact paths."""

from __future__ import annotations

import base64
import json
import math
from typing import Any

import pytest
from _receiver_support import make_request, to_otlp_json
from google.protobuf import json_format
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from tracepass.collector.receiver import OtlpJsonError, decode_json_bytes, decode_json_object


def _span_doc(**fields: Any) -> dict[str, Any]:
    return {"resourceSpans": [{"scopeSpans": [{"spans": [fields]}]}]}


def _span(req: ExportTraceServiceRequest) -> Span:
    return req.resource_spans[0].scope_spans[0].spans[0]


def test_sdk_request_round_trips() -> None:
    req = make_request(3)
    assert decode_json_bytes(json.dumps(to_otlp_json(req))) == req


def test_json_format_would_misread_hex_ids() -> None:
    doc = _span_doc(traceId="5B8EFFF798038103D269B633813FC60C", spanId="eee19b7ec3c1b174")
    ours = _span(decode_json_object(doc))
    assert ours.trace_id == bytes.fromhex("5b8efff798038103d269b633813fc60c")
    assert ours.span_id == bytes.fromhex("eee19b7ec3c1b174")
    theirs = json_format.ParseDict(doc, ExportTraceServiceRequest())
    assert _span(theirs).trace_id != ours.trace_id  # the silent base64 misread


def test_lenient_forms() -> None:
    doc = {
        "resource_spans": [
            {
                "scope_spans": [
                    {
                        "spans": [
                            {
                                "name": "s",
                                "kind": "SPAN_KIND_CLIENT",
                                "start_time_unix_nano": "1700000000000000001",
                                "endTimeUnixNano": 1700000000000000002,
                                "status": {"code": "STATUS_CODE_ERROR", "message": "m"},
                                "attributes": [
                                    {"key": "i", "value": {"intValue": "-9223372036854775808"}},
                                    {"key": "j", "value": {"intValue": 5.0}},
                                    {"key": "d", "value": {"doubleValue": "NaN"}},
                                    {"key": "b", "value": {"bytesValue": "AAEC"}},
                                    {"key": "e", "value": {}},
                                    {
                                        "key": "kv",
                                        "value": {
                                            "kvlistValue": {
                                                "values": [
                                                    {"key": "x", "value": {"boolValue": False}}
                                                ]
                                            }
                                        },
                                    },
                                ],
                                "someFutureField": {"nested": [1, 2]},
                            }
                        ]
                    }
                ],
                "unknownTop": 1,
            }
        ],
        "extra": True,
    }
    span = _span(decode_json_object(doc))
    assert span.kind == Span.SPAN_KIND_CLIENT
    assert span.start_time_unix_nano == 1700000000000000001
    assert span.end_time_unix_nano == 1700000000000000002
    assert span.status.code == Status.STATUS_CODE_ERROR
    attrs = {a.key: a.value for a in span.attributes}
    assert attrs["i"].int_value == -(2**63)
    assert attrs["j"].int_value == 5
    assert attrs["d"].double_value != attrs["d"].double_value  # NaN
    assert attrs["b"].bytes_value == b"\x00\x01\x02"
    assert attrs["e"].WhichOneof("value") is None
    assert attrs["kv"].kvlist_value.values[0].value.HasField("bool_value")


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ([], "expected a JSON object at top level, got an array"),
        ({"resourceSpans": {}}, "resourceSpans: expected an array, got an object"),
        (
            _span_doc(spanId="0102"),
            "resourceSpans[0].scopeSpans[0].spans[0].spanId: expected 16 hex characters "
            "(8 bytes), got 4 characters '0102'",
        ),
        (
            _span_doc(traceId=12),
            "resourceSpans[0].scopeSpans[0].spans[0].traceId: expected a hex string, got a number",
        ),
        (
            _span_doc(startTimeUnixNano="-5"),
            "resourceSpans[0].scopeSpans[0].spans[0].startTimeUnixNano: integer -5 out of range "
            "[0, 18446744073709551615]",
        ),
        (
            _span_doc(kind="SPAN_KIND_WEIRD"),
            "resourceSpans[0].scopeSpans[0].spans[0].kind: unknown enum value 'SPAN_KIND_WEIRD'",
        ),
        (
            _span_doc(attributes=[{"key": "a", "value": {"intValue": "1.5"}}]),
            "resourceSpans[0].scopeSpans[0].spans[0].attributes[0].value.intValue: expected an "
            "integer, got string '1.5'",
        ),
        (
            _span_doc(
                events=[{"attributes": [{"key": "a", "value": {"arrayValue": {"values": [3]}}}]}]
            ),
            "resourceSpans[0].scopeSpans[0].spans[0].events[0].attributes[0].value.arrayValue"
            ".values[0]: expected an AnyValue object, got a number",
        ),
        (
            _span_doc(links=[{"traceId": "g" * 32}]),
            "resourceSpans[0].scopeSpans[0].spans[0].links[0].traceId: not a hex string: '"
            + "g" * 32
            + "'",
        ),
    ],
)
def test_precise_errors(doc: Any, message: str) -> None:
    with pytest.raises(OtlpJsonError) as info:
        decode_json_object(doc)
    assert str(info.value) == message


def test_invalid_json_syntax() -> None:
    with pytest.raises(OtlpJsonError, match="invalid JSON at line 1 column 2"):
        decode_json_bytes(b"{")


# --- property: any request survives proto → OTLP/JSON → decoder ----------------------

_text = st.text(max_size=8)
_scalar = st.one_of(
    st.builds(lambda s: {"string_value": s}, _text),
    st.builds(lambda b: {"bool_value": b}, st.booleans()),
    st.builds(lambda i: {"int_value": i}, st.integers(-(2**63), 2**63 - 1)),
    st.builds(
        lambda f: {
            "double_value": f if math.isfinite(f) else ("Infinity" if f > 0 else "-Infinity")
        },
        st.floats(allow_nan=False, allow_infinity=True),
    ),
    st.builds(lambda b: {"bytes_value": base64.b64encode(b).decode()}, st.binary(max_size=8)),
)
_value = st.recursive(
    _scalar,
    lambda inner: st.one_of(
        st.builds(lambda vs: {"array_value": {"values": vs}}, st.lists(inner, max_size=3)),
        st.builds(
            lambda kvs: {"kvlist_value": {"values": [{"key": k, "value": v} for k, v in kvs]}},
            st.lists(st.tuples(_text, inner), max_size=3),
        ),
    ),
    max_leaves=6,
)
_attrs = st.lists(st.builds(lambda k, v: {"key": k, "value": v}, _text, _value), max_size=4)
_span_st = st.builds(
    lambda tid, sid, name, kind, t0, t1, attrs, code: {
        "trace_id": base64.b64encode(tid).decode(),
        "span_id": base64.b64encode(sid).decode(),
        "name": name,
        "kind": kind,
        "start_time_unix_nano": t0,
        "end_time_unix_nano": t1,
        "attributes": attrs,
        "status": {"code": code},
        "events": [{"name": name, "time_unix_nano": t0, "attributes": attrs}],
    },
    st.binary(min_size=16, max_size=16),
    st.binary(min_size=8, max_size=8),
    _text,
    st.integers(0, 5),
    st.integers(0, 2**64 - 1),
    st.integers(0, 2**64 - 1),
    _attrs,
    st.integers(0, 2),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_span_st, min_size=1, max_size=3), _attrs)
def test_property_round_trip(spans: list[dict[str, Any]], resource_attrs: Any) -> None:
    req = json_format.ParseDict(
        {
            "resource_spans": [
                {
                    "resource": {"attributes": resource_attrs},
                    "scope_spans": [{"scope": {"name": "s"}, "spans": spans}],
                }
            ]
        },
        ExportTraceServiceRequest(),
    )
    assert decode_json_bytes(json.dumps(to_otlp_json(req))) == req
