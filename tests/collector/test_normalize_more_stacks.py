"""Normalization of the stacks added to the corpus for issue 25 part 3 (LiteLLM's OTel
callback, MLflow's OTLP export, OpenInference Bedrock, BeeAI and AG2): each field's
source pinned on a hand-made span. The real spans are in tests/frameworks/corpus
(litellm_otel, mlflow_otlp, bedrock_openinference_converse, beeai_openinference,
ag2_openinference)."""

from __future__ import annotations

import json

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, Span
from test_normalize_basics import kvs, make_request, make_span

from tracepass.collector.normalize import RecordKind, normalize_request
from tracepass.collector.normalize.registry import TOOL_RESPONSE_NAMES_ATTR, TOOL_RESPONSES_ATTR


def _scoped(scope: str, *spans: Span) -> ExportTraceServiceRequest:
    rs = ResourceSpans()
    rs.resource.attributes.extend(kvs({"service.name": "svc"}))
    scoped = rs.scope_spans.add()
    scoped.scope.name = scope
    scoped.spans.extend(spans)
    return ExportTraceServiceRequest(resource_spans=[rs])


def _oi_tool(attrs: dict[str, object]) -> Span:
    return make_span("t", {"openinference.span.kind": "TOOL", "tool.name": "book", **attrs})


def test_litellm_requests_from_flattened_completion_and_results_from_history() -> None:
    history = [
        {"role": "user", "parts": [{"type": "text", "content": "Book it"}]},
        {
            "role": "assistant",
            "parts": [],
            "tool_calls": [{"id": "c1", "function": {"name": "book", "arguments": "{}"}}],
        },
        {"role": "tool", "parts": [{"type": "text", "content": "done"}], "tool_call_id": "c1"},
    ]
    span = make_span(
        "litellm_request",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": json.dumps(history),
            "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": []}]),
            "gen_ai.completion.0.function_call.name": "book",
            "gen_ai.completion.0.function_call.arguments": '{"id": 2}',
        },
    )
    (rec,), _ = normalize_request(_scoped("litellm", span))
    assert rec.kind is RecordKind.MODEL
    assert [(c.name, c.arguments, c.call_id) for c in rec.requested_tool_calls] == [
        ("book", {"id": 2}, None)
    ]
    assert rec.attributes[TOOL_RESPONSES_ATTR] == {"c1": "done"}
    assert rec.attributes[TOOL_RESPONSE_NAMES_ATTR] == {"c1": "book"}


def test_mlflow_native_spans() -> None:
    agent = make_span(
        "travel-agent",
        {
            "mlflow.spanType": '"AGENT"',
            "mlflow.spanInputs": '{"query": "Weather?"}',
            "mlflow.spanOutputs": '"Sunny."',
        },
        span_id=1,
    )
    body = {
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "w", "arguments": "{}"},
                        }
                    ],
                }
            }
        ]
    }
    chat = make_span(
        "chat",
        {
            "mlflow.spanType": '"CHAT_MODEL"',
            "mlflow.spanInputs": json.dumps(
                {"messages": [{"role": "user", "content": "Weather?"}]}
            ),
            "mlflow.spanOutputs": json.dumps(body),
        },
        span_id=2,
        parent=1,
    )
    tool = make_span(
        "w",
        {
            "mlflow.spanType": '"TOOL"',
            "mlflow.spanFunctionName": '"w"',
            "mlflow.spanInputs": '{"city": "Paris"}',
            "mlflow.spanOutputs": '"Sunny"',
        },
        span_id=3,
        parent=1,
    )
    (a, c, t), _ = normalize_request(make_request(agent, chat, tool))
    assert (a.kind, a.input_text, a.output_text, a.agent_name) == (
        RecordKind.TURN,
        "Weather?",
        "Sunny.",
        "travel-agent",
    )
    assert (c.kind, c.input_text, [x.call_id for x in c.requested_tool_calls]) == (
        RecordKind.MODEL,
        "Weather?",
        ["c1"],
    )
    assert (t.kind, t.tool_name, t.tool_arguments) == (RecordKind.TOOL, "w", {"city": "Paris"})


def test_bedrock_tool_result_with_error_status_is_an_error() -> None:
    messages = [
        {
            "role": "user",
            "content": [
                {"toolResult": {"toolUseId": "c1", "content": [{"text": "ok"}]}},
                {
                    "toolResult": {
                        "toolUseId": "c2",
                        "content": [{"text": "sold out"}],
                        "status": "error",
                    }
                },
            ],
        }
    ]
    span = make_span(
        "bedrock.converse",
        {"openinference.span.kind": "LLM", "input.value": json.dumps(messages)},
    )
    (rec,), _ = normalize_request(_scoped("openinference.instrumentation.bedrock", span))
    assert rec.attributes[TOOL_RESPONSES_ATTR]["c2"] == {"error": "sold out"}
    # a successful result is the flattened messages' business, not the adapter's
    assert "c1" not in rec.attributes[TOOL_RESPONSES_ATTR]


def test_beeai_call_input_cause_and_non_calls() -> None:
    failing = _oi_tool(
        {
            "input.value": '{"input": {"id": "FL-404"}, "options": null}',
            "output.value": "ToolError(x): Tool Error\n  ToolFailure(y): sold out",
        }
    )
    failing.status.code = failing.status.STATUS_CODE_ERROR
    failing.status.message = "Tool Error"
    event = make_span(
        "error",
        {"openinference.span.kind": "TOOL", "metadata.path": "tool.custom.book.error"},
        span_id=2,
    )
    final = make_span(
        "final_answer",
        {"openinference.span.kind": "TOOL", "tool.name": "final_answer"},
        span_id=3,
    )
    (f, e, a), _ = normalize_request(
        _scoped("openinference.instrumentation.beeai", failing, event, final)
    )
    assert (f.kind, f.tool_arguments, f.tool_result) == (RecordKind.TOOL, {"id": "FL-404"}, None)
    assert f.error is not None
    assert "sold out" in f.error
    assert (e.kind, a.kind) == (RecordKind.OTHER, RecordKind.OTHER)


def test_ag2_arguments_and_execute_function_outputs() -> None:
    ok = _oi_tool(
        {
            "input.value": '{"name": "book", "arguments": "{\\"id\\": 1}"}',
            "tool_call.function.arguments": '{"id": 1}',
            "output.value": '[true, {"name": "book", "role": "function", "content": "done"}]',
        }
    )
    failed = _oi_tool(
        {
            "tool_call.function.arguments": '{"id": 2}',
            "output.value": '[false, {"name": "book", "content": "Error: sold out"}]',
        }
    )
    failed.span_id = (2).to_bytes(8, "big")
    failed.status.code = failed.status.STATUS_CODE_ERROR
    failed.status.message = "tool execution failed"
    (o, f), _ = normalize_request(_scoped("openinference.instrumentation.ag2", ok, failed))
    assert (o.tool_arguments, o.tool_result, o.error) == ({"id": 1}, "done", None)
    assert (f.tool_arguments, f.tool_result, f.error) == ({"id": 2}, None, "Error: sold out")
