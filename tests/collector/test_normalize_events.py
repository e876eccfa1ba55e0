"""GenAI content in span events and in OTLP log records (events API), joined to spans."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from test_normalize_basics import TRACE, hexid, kvs, make_request, make_span, to_any

from tracepass.collector.normalize import (
    RecordKind,
    normalize_any,
    normalize_logs_request,
    normalize_request,
)
from tracepass.collector.normalize.registry import SOURCES_ATTR
from tracepass.collector.pipeline import assemble_offline
from tracepass.collector.receiver.otlp_json import OtlpJsonError
from tracepass.collector.receiver.otlp_json_logs import decode_logs_json_object
from tracepass.collector.receiver.otlpfile import read_otlp_bytes

CONV = "conv-ev"


def with_events(span: Span, *events: tuple[str, Mapping[str, Any]]) -> Span:
    for name, attrs in events:
        ev = span.events.add(name=name, time_unix_nano=span.start_time_unix_nano)
        ev.attributes.extend(kvs(attrs))
    return span


def strands_like_spans() -> list[Span]:
    """Strands' default tracing: content only in span events (JSON text attributes)."""
    turn = with_events(
        make_span(
            "invoke_agent travel",
            {"gen_ai.operation.name": "invoke_agent", "gen_ai.conversation.id": CONV},
            span_id=1,
            start=1,
            end=100,
        ),
        ("gen_ai.user.message", {"content": json.dumps([{"text": "Weather in Paris?"}])}),
        ("gen_ai.choice", {"message": "Sunny in Paris.\n", "finish_reason": "end_turn"}),
    )
    model = with_events(
        make_span(
            "chat",
            {"gen_ai.operation.name": "chat", "gen_ai.conversation.id": CONV},
            span_id=2,
            parent=1,
            start=2,
            end=10,
        ),
        ("gen_ai.user.message", {"content": json.dumps([{"text": "Weather in Paris?"}])}),
        (
            "gen_ai.choice",
            {
                "message": json.dumps(
                    [
                        {
                            "toolUse": {
                                "toolUseId": "call_1",
                                "name": "get_weather",
                                "input": {"city": "Paris"},
                            }
                        }
                    ]
                )
            },
        ),
    )
    tool = with_events(
        make_span(
            "execute_tool get_weather",
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "get_weather",
                "gen_ai.tool.call.id": "call_1",
                "gen_ai.conversation.id": CONV,
            },
            span_id=3,
            parent=1,
            start=11,
            end=20,
        ),
        ("gen_ai.tool.message", {"role": "tool", "content": '{"city": "Paris"}', "id": "call_1"}),
        ("gen_ai.choice", {"message": '[{"text": "Sunny, 21 C"}]', "id": "call_1"}),
    )
    return [turn, model, tool]


def test_span_events_fill_turn_model_and_tool_records() -> None:
    records, _ = normalize_request(make_request(*strands_like_spans()))
    turn, model, tool = records
    assert (turn.input_text, turn.output_text) == ("Weather in Paris?", "Sunny in Paris.\n")
    assert turn.attributes[SOURCES_ATTR] == {
        "input_text": "span_event",
        "output_text": "span_event",
    }
    assert model.input_text == "Weather in Paris?"
    assert [(c.name, c.arguments, c.call_id) for c in model.requested_tool_calls] == [
        ("get_weather", {"city": "Paris"}, "call_1")
    ]
    assert tool.kind is RecordKind.TOOL
    assert tool.tool_arguments == {"city": "Paris"}
    # The content-block list is unwrapped by the Strands adapter (scope-based), not here.
    assert tool.tool_result == [{"text": "Sunny, 21 C"}]


def test_attributes_win_over_events() -> None:
    span = with_events(
        make_span(
            "execute_tool t",
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "t",
                "gen_ai.tool.call.arguments": {"a": 1},
                "gen_ai.tool.call.result": {"ok": True},
            },
        ),
        ("gen_ai.tool.message", {"content": '{"a": 2}'}),
        ("gen_ai.choice", {"message": '{"ok": false}'}),
    )
    (rec,), _ = normalize_request(make_request(span))
    assert (rec.tool_arguments, rec.tool_result) == ({"a": 1}, {"ok": True})
    assert SOURCES_ATTR not in rec.attributes


def test_operation_details_event_carries_semconv_messages() -> None:
    user = [{"role": "user", "parts": [{"type": "text", "content": "Hi there"}]}]
    out = [{"role": "assistant", "parts": [{"type": "text", "content": "Hello!"}]}]
    span = with_events(
        make_span("invoke_agent a", {"gen_ai.operation.name": "invoke_agent"}),
        (
            "gen_ai.client.inference.operation.details",
            {"gen_ai.input.messages": json.dumps(user), "gen_ai.output.messages": json.dumps(out)},
        ),
    )
    (rec,), _ = normalize_request(make_request(span))
    assert (rec.input_text, rec.output_text) == ("Hi there", "Hello!")


def test_error_without_message_takes_the_exception_event() -> None:
    span = make_span(
        "execute_tool t",
        {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t"},
        error="",
    )
    with_events(
        span, ("exception", {"exception.type": "ModelRetry", "exception.message": "bad id"})
    )
    (rec,), _ = normalize_request(make_request(span))
    assert rec.error == "bad id"
    bare = make_span("execute_tool t", {"gen_ai.operation.name": "execute_tool"}, error="")
    (rec,), _ = normalize_request(make_request(bare))
    assert rec.error == "error"


# ------------------------------------------------------------------ log-record events


def log_request(span_id: int, *events: tuple[str, Mapping[str, Any]]) -> ExportLogsServiceRequest:
    req = ExportLogsServiceRequest()
    rl = req.resource_logs.add()
    rl.resource.attributes.extend(kvs({"service.name": "svc"}))
    records = rl.scope_logs.add().log_records
    for i, (name, body) in enumerate(events):
        lr = LogRecord(
            event_name=name,
            trace_id=TRACE,
            span_id=span_id.to_bytes(8, "big"),
            time_unix_nano=10 + i,
        )
        lr.body.CopyFrom(to_any(dict(body)))
        records.append(lr)
    return req


def content_less_spans() -> list[Span]:
    """A turn with a model call and a tool call whose content went to log records."""
    return [
        make_span(
            "invoke_agent a",
            {"gen_ai.operation.name": "invoke_agent", "gen_ai.conversation.id": CONV},
            span_id=1,
            start=1,
            end=100,
        ),
        make_span("chat m", {"gen_ai.operation.name": "chat"}, span_id=2, parent=1, start=2, end=9),
        make_span(
            "execute_tool get_weather",
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "get_weather",
                "gen_ai.tool.call.id": "call_1",
            },
            span_id=3,
            parent=1,
            start=10,
            end=20,
        ),
    ]


LOGS = [
    log_request(
        2,
        ("gen_ai.user.message", {"content": "Weather in Paris?"}),
        (
            "gen_ai.choice",
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                        }
                    ],
                },
            },
        ),
    ),
    log_request(3, ("gen_ai.choice", {"message": "Sunny, 21 C"})),
]


def test_log_events_become_event_records_for_their_span() -> None:
    records, rejections = normalize_logs_request(LOGS[0])
    assert rejections == []
    assert [r.kind for r in records] == [RecordKind.EVENT, RecordKind.EVENT]
    assert {r.parent_span_id for r in records} == {hexid(2)}
    assert len({r.span_id for r in records}) == 2
    again, _ = normalize_logs_request(LOGS[0])  # an exporter retry: same ids
    assert [r.span_id for r in again] == [r.span_id for r in records]


@pytest.mark.parametrize("logs_first", [False, True])
def test_log_events_join_their_span_whichever_arrives_first(logs_first: bool) -> None:
    spans = make_request(*content_less_spans())
    requests = [*LOGS, spans] if logs_first else [spans, *LOGS]
    (conv,) = assemble_offline(requests)
    assert conv.id == CONV
    (turn,) = conv.turns
    assert turn.query == "Weather in Paris?"
    (call,) = turn.tool_calls
    assert (call.name, call.arguments, call.result) == (
        "get_weather",
        {"city": "Paris"},
        "Sunny, 21 C",
    )
    assert call.arguments_source == "model_request"


def _through_gateway(req: ExportLogsServiceRequest, original: str | None) -> None:
    """What the gateway's conversationid processor does to a record: its trace id becomes
    the 16-byte routing digest, its own trace id moves to an attribute."""
    for lr in req.resource_logs[0].scope_logs[0].log_records:
        if original is not None:
            lr.attributes.extend(kvs({"tracepass.original_trace_id": original}))
        lr.trace_id = b"0123456789abcdef"


def test_log_events_rewritten_by_the_gateway_join_their_own_trace() -> None:
    req = ExportLogsServiceRequest()
    req.CopyFrom(LOGS[1])
    _through_gateway(req, TRACE.hex())
    (rec,), rejections = normalize_logs_request(req)
    assert rejections == []
    assert rec.trace_id == TRACE.hex()
    fields = rec.attributes["tracepass.event"]["fields"]
    assert "tracepass.original_trace_id" not in fields
    logs = [ExportLogsServiceRequest(), ExportLogsServiceRequest()]
    for copy, orig in zip(logs, LOGS, strict=True):
        copy.CopyFrom(orig)
        _through_gateway(copy, TRACE.hex())
    (conv,) = assemble_offline([*logs, make_request(*content_less_spans())])
    (call,) = conv.turns[0].tool_calls
    assert call.result == "Sunny, 21 C"


@pytest.mark.parametrize("bad", ["zz" * 16, "ab" * 15, ""])
def test_malformed_original_trace_id_keeps_the_record_trace_id(bad: str) -> None:
    req = ExportLogsServiceRequest()
    req.CopyFrom(LOGS[1])
    _through_gateway(req, bad)
    (rec,), _ = normalize_logs_request(req)
    assert rec.trace_id == b"0123456789abcdef".hex()


def test_log_records_that_are_not_genai_events_are_skipped_and_unplaceable_ones_rejected() -> None:
    req = log_request(2, ("app.started", {"x": 1}), ("gen_ai.user.message", {"content": "q"}))
    req.resource_logs[0].scope_logs[0].log_records[1].span_id = b""
    records, rejections = normalize_any(req)
    assert records == []
    assert [r.reason for r in rejections] == ["event_without_span"]


def test_otlp_json_files_yield_logs_requests() -> None:
    logs_doc = {
        "resourceLogs": [
            {
                "scopeLogs": [
                    {
                        "logRecords": [
                            {
                                "eventName": "gen_ai.user.message",
                                "traceId": TRACE.hex(),
                                "spanId": hexid(2),
                                "timeUnixNano": "5",
                                "severityNumber": "SEVERITY_NUMBER_INFO",
                                "body": {
                                    "kvlistValue": {
                                        "values": [
                                            {"key": "content", "value": {"stringValue": "q"}}
                                        ]
                                    }
                                },
                            }
                        ]
                    }
                ]
            }
        ]
    }
    data = (json.dumps({"resourceSpans": []}) + "\n" + json.dumps(logs_doc) + "\n").encode()
    traces, logs = list(read_otlp_bytes(data, "f.jsonl"))
    assert not isinstance(traces, ExportLogsServiceRequest)
    assert isinstance(logs, ExportLogsServiceRequest)
    record = logs.resource_logs[0].scope_logs[0].log_records[0]
    assert (record.event_name, record.span_id.hex(), record.time_unix_nano) == (
        "gen_ai.user.message",
        hexid(2),
        5,
    )


def test_logs_decoder_errors_name_the_json_path() -> None:
    bad = {"resourceLogs": [{"scopeLogs": [{"logRecords": [{"spanId": "xyz"}]}]}]}
    with pytest.raises(
        OtlpJsonError, match=r"resourceLogs\[0\]\.scopeLogs\[0\]\.logRecords\[0\]\.spanId"
    ):
        decode_logs_json_object(bad)
