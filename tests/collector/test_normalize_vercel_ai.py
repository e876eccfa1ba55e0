"""Vercel AI SDK spans: its own `ai.*` shape (ai@6, ai@7's LegacyOpenTelemetry) and the
conversation id ai@7's GenAI-shaped spans carry in the runtime context. The real spans
are in the corpus (tests/frameworks/corpus/vercel_ai_*); these pin each field's source."""

from __future__ import annotations

import json

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, Span
from test_normalize_basics import kvs, make_request, make_span

from tracepass.collector.normalize import RecordKind, normalize_request
from tracepass.collector.normalize.registry import ADAPTERS_ATTR, CONVENTION_ATTR


def _generate_text(**extra: object) -> dict[str, object]:
    return {
        "ai.operationId": "ai.generateText",
        "operation.name": "ai.generateText travel-agent",
        "ai.telemetry.functionId": "travel-agent",
        "ai.telemetry.metadata.conversationId": "conv-1",
        "ai.prompt": json.dumps(
            {
                "system": "be brief",
                "messages": [
                    {"role": "user", "content": "old"},
                    {"role": "assistant", "content": [{"type": "text", "text": "old answer"}]},
                    {"role": "user", "content": "Weather in Oslo?"},
                ],
            }
        ),
        "ai.response.text": "Cold.",
        **extra,
    }


def test_generate_text_is_a_turn_with_the_last_user_message_and_the_response_text() -> None:
    (rec,), _ = normalize_request(make_request(make_span("ai.generateText", _generate_text())))
    assert rec.kind is RecordKind.TURN
    assert (rec.input_text, rec.output_text) == ("Weather in Oslo?", "Cold.")
    assert rec.conversation_id == "conv-1"
    assert rec.agent_name == "travel-agent"  # functionId, not the resource's service
    assert rec.attributes[CONVENTION_ATTR] == "vercel_ai"


def test_a_plain_prompt_is_the_query_and_gen_ai_agent_name_wins_over_function_id() -> None:
    attrs = _generate_text(
        **{"ai.prompt": json.dumps({"prompt": "Hi?"}), "gen_ai.agent.name": "named"}
    )
    (rec,), _ = normalize_request(make_request(make_span("ai.streamText", attrs)))
    assert (rec.input_text, rec.agent_name) == ("Hi?", "named")


def test_do_generate_is_a_model_call_with_requested_tool_calls_and_offered_tools() -> None:
    attrs = {
        "ai.operationId": "ai.generateText.doGenerate",
        "ai.prompt.messages": json.dumps(
            [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": [{"type": "text", "text": "Book FL-1"}]},
            ]
        ),
        "ai.prompt.tools": [
            json.dumps(
                {
                    "type": "function",
                    "name": "book",
                    "inputSchema": {"type": "object", "properties": {"id": {"type": "string"}}},
                }
            )
        ],
        "ai.response.text": "",
        "ai.response.toolCalls": json.dumps(
            [
                {"toolCallId": "c1", "toolName": "book", "input": {"id": "FL-1"}},
                {"toolCallId": "c2", "toolName": "book", "args": '{"id": "FL-2"}'},  # ai@4
            ]
        ),
    }
    (rec,), _ = normalize_request(make_request(make_span("ai.generateText.doGenerate", attrs)))
    assert rec.kind is RecordKind.MODEL
    assert (rec.input_text, rec.output_text) == ("Book FL-1", None)
    assert [(c.name, c.arguments, c.call_id) for c in rec.requested_tool_calls] == [
        ("book", {"id": "FL-1"}, "c1"),
        ("book", {"id": "FL-2"}, "c2"),
    ]
    assert rec.tool_definitions is not None
    assert [d.name for d in rec.tool_definitions] == ["book"]


def test_tool_call_span_and_its_error() -> None:
    attrs = {
        "ai.operationId": "ai.toolCall",
        "ai.toolCall.name": "book",
        "ai.toolCall.id": "c1",
        "ai.toolCall.args": '{"id": "FL-404"}',
    }
    (rec,), _ = normalize_request(
        make_request(make_span("ai.toolCall", attrs, error="flight FL-404 is sold out"))
    )
    assert rec.kind is RecordKind.TOOL
    assert (rec.tool_name, rec.tool_call_id, rec.tool_arguments) == ("book", "c1", {"id": "FL-404"})
    assert (rec.tool_result, rec.error) == (None, "flight FL-404 is sold out")


def test_other_operations_are_kept_for_the_tree() -> None:
    (rec,), _ = normalize_request(
        make_request(make_span("ai.embed", {"ai.operationId": "ai.embed"}))
    )
    assert rec.kind is RecordKind.OTHER


def _scoped(scope: str, span: Span) -> ExportTraceServiceRequest:
    rs = ResourceSpans()
    rs.resource.attributes.extend(kvs({"service.name": "svc"}))
    scoped = rs.scope_spans.add()
    scoped.scope.name = scope
    scoped.spans.append(span)
    return ExportTraceServiceRequest(resource_spans=[rs])


def test_ai7_genai_spans_take_the_conversation_id_from_the_runtime_context() -> None:
    attrs = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "travel-agent",
        "ai.settings.context.conversationId": "conv-9",
    }
    (rec,), _ = normalize_request(_scoped("gen_ai", make_span("invoke_agent travel-agent", attrs)))
    assert (rec.kind, rec.conversation_id) == (RecordKind.TURN, "conv-9")
    assert rec.attributes[ADAPTERS_ATTR] == ["vercel_ai"]
    # An explicit conversation id is never replaced.
    attrs["gen_ai.conversation.id"] = "explicit"
    (rec,), _ = normalize_request(_scoped("gen_ai", make_span("invoke_agent travel-agent", attrs)))
    assert rec.conversation_id == "explicit"
