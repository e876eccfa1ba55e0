"""Normalization for multi-agent and detached-span stacks: agento11y's adapter (run ids,
root chain, generateText, base64 arguments, hand-offs), OpenAI Agents hand-off spans under
OpenInference, `invoke_workflow` turns, the last step's answer, printed ToolMessages.
The real spans are in the corpus (tests/frameworks/corpus/agento11y_*,
openai_agents_openinference_handoff); these pin each field's source."""

from __future__ import annotations

import base64
import json

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, Span
from test_normalize_basics import kvs, make_request, make_span

from tracepass.collector.normalize import normalize_request
from tracepass.collector.normalize.registry import ROLE_ATTR, ROLE_HANDOFF, RUN_IDS_ATTR
from tracepass.collector.records import RecordKind, coerce_result, pyrepr

SIGIL = "github.com/grafana/sigil/sdks/python"


def _scoped(scope: str, *spans: Span) -> ExportTraceServiceRequest:
    rs = ResourceSpans()
    rs.resource.attributes.extend(kvs({"service.name": "svc"}))
    scoped = rs.scope_spans.add()
    scoped.scope.name = scope
    scoped.spans.extend(spans)
    return ExportTraceServiceRequest(resource_spans=[rs])


def _b64(value: object) -> str:
    return base64.b64encode(json.dumps(value).encode()).decode()


def test_agento11y_root_chain_is_the_turn_and_nested_chains_are_not() -> None:
    chain = {"gen_ai.operation.name": "framework_chain", "agento11y.framework.run_type": "chain"}
    root = make_span("chain", {**chain, "agento11y.framework.run_id": "r1"}, span_id=1)
    nested = make_span(
        "chain",
        {**chain, "agento11y.framework.run_id": "r2", "agento11y.framework.parent_run_id": "r1"},
        span_id=2,
    )
    (a, b), _ = normalize_request(_scoped(SIGIL, root, nested))
    assert (a.kind, b.kind) == (RecordKind.TURN, RecordKind.OTHER)
    assert a.attributes[RUN_IDS_ATTR] == ["r1", None]
    assert b.attributes[RUN_IDS_ATTR] == ["r2", "r1"]


def test_agento11y_model_calls_run_ids_from_metadata_and_base64_arguments() -> None:
    output = [
        {
            "role": "assistant",
            "parts": [
                {"type": "tool_call", "id": "c1", "name": "book", ARGS: _b64({"id": "FL-1"})},
                {"type": "tool_call", "id": "c2", "name": "book", ARGS: "!!not base64!!"},
            ],
        }
    ]
    attrs = {
        "gen_ai.operation.name": "chat",
        "gen_ai.input.messages": [{"role": "user", "parts": [{"type": "text", "content": "q"}]}],
        "gen_ai.output.messages": output,
        "agento11y.generation.metadata": json.dumps(
            {"agento11y.framework.run_id": "r3", "agento11y.framework.parent_run_id": "r1"}
        ),
    }
    (rec,), _ = normalize_request(_scoped(SIGIL, make_span("chat m", attrs)))
    assert rec.kind is RecordKind.MODEL
    assert [(c.call_id, c.arguments) for c in rec.requested_tool_calls] == [
        ("c1", {"id": "FL-1"}),
        ("c2", {}),  # undecodable: left as the span gave it
    ]
    assert rec.attributes[RUN_IDS_ATTR] == ["r3", "r1"]


ARGS = "agento11y.arguments_b64"


def test_agento11y_generate_text_is_a_model_call_and_handoff_a_hand_off() -> None:
    model = make_span("generateText m", {"gen_ai.operation.name": "generateText"}, span_id=1)
    handoff = make_span(
        "agent_handoff",
        {
            "gen_ai.operation.name": "framework_chain",
            "agento11y.framework.run_type": "handoff",
            "agento11y.framework.run_id": "h",
            "agento11y.framework.parent_run_id": "r1",
        },
        span_id=2,
    )
    (m, h), _ = normalize_request(_scoped(SIGIL, model, handoff))
    assert m.kind is RecordKind.MODEL
    assert (h.kind, h.attributes[ROLE_ATTR]) == (RecordKind.OTHER, ROLE_HANDOFF)


def test_openai_agents_handoff_span_is_a_hand_off_not_a_tool() -> None:
    span = make_span(
        "handoff to booking-agent",
        {
            "openinference.span.kind": "TOOL",
            "input.value": "travel-agent",
            "output.value": "booking-agent",
        },
    )
    (rec,), _ = normalize_request(_scoped("openinference.instrumentation.openai_agents", span))
    assert (rec.kind, rec.agent_name, rec.tool_name) == (RecordKind.OTHER, "booking-agent", None)
    assert rec.attributes[ROLE_ATTR] == ROLE_HANDOFF


def test_invoke_workflow_is_a_turn_and_its_answer_the_last_steps() -> None:
    out = [
        {"role": "assistant", "parts": [{"type": "text", "content": "Let me look."}]},
        {"role": "assistant", "parts": [{"type": "text", "content": "It is sunny."}]},
    ]
    attrs = {"gen_ai.operation.name": "invoke_workflow", "gen_ai.output.messages": out}
    (rec,), _ = normalize_request(make_request(make_span("invoke_workflow graph", attrs)))
    assert (rec.kind, rec.output_text) == (RecordKind.TURN, "It is sunny.")


@pytest.mark.parametrize(
    ("text", "content"),
    [
        ("content='Sunny' name='get_weather' tool_call_id='call_1'", "Sunny"),
        ("ToolMessage(content=\"it's 5\", name='calc', tool_call_id='c')", "it's 5"),
        ("content='[1, 2]' name='x'", [1, 2]),  # the content is then read like any result
    ],
)
def test_a_printed_tool_message_is_its_content(text: str, content: object) -> None:
    assert coerce_result(text) == content


@pytest.mark.parametrize(
    "text",
    ["content=plain words", "content='unterminated", "content='a'b", "content=['x']", "x" * 10],
)
def test_other_text_is_kept_as_it_is(text: str) -> None:
    assert coerce_result(text) == text
    assert pyrepr.message_content(text) is pyrepr.NOT_PARSED


def test_openai_agents_js_handoff_and_agent_name_from_the_graph_node() -> None:
    scope = "@arizeai/openinference-instrumentation-openai-agents"
    agent = make_span(
        "booking-agent",
        {"openinference.span.kind": "AGENT", "graph.node.id": "booking-agent"},
        span_id=1,
    )
    handoff = make_span(
        "handoff to booking-agent",
        {
            "openinference.span.kind": "TOOL",
            "tool.name": "handoff_to_booking-agent",
            "input.value": '{"from_agent": "travel-agent"}',
            "output.value": '{"to_agent": "booking-agent"}',
        },
        span_id=2,
    )
    (a, h), _ = normalize_request(_scoped(scope, agent, handoff))
    assert (a.kind, a.agent_name) == (RecordKind.TURN, "booking-agent")
    assert (h.kind, h.agent_name, h.attributes[ROLE_ATTR]) == (
        RecordKind.OTHER,
        "booking-agent",
        ROLE_HANDOFF,
    )


def test_langchain_js_model_requests_from_the_generations() -> None:
    message = {
        "lc": 1,
        "type": "constructor",
        "id": ["langchain_core", "messages", "AIMessage"],
        "kwargs": {
            "content": "",
            "tool_calls": [
                {"name": "get_weather", "args": {"city": "Paris"}, "id": "c1", "type": "tool_call"}
            ],
        },
    }
    attrs = {
        "openinference.span.kind": "LLM",
        "output.value": json.dumps({"generations": [[{"text": "", "message": message}]]}),
        "llm.output_messages.0.message.role": "assistant",
    }
    scope = "@arizeai/openinference-instrumentation-langchain"
    (rec,), _ = normalize_request(_scoped(scope, make_span("ScriptedChatModel", attrs)))
    assert [(c.name, c.arguments, c.call_id) for c in rec.requested_tool_calls] == [
        ("get_weather", {"city": "Paris"}, "c1")
    ]


def test_dspy_react_finish_is_not_a_tool_call() -> None:
    attrs = {"openinference.span.kind": "TOOL", "input.value": '{"kwargs": {}}'}
    finish = make_span("finish.__call__", {**attrs, "output.value": '"Completed."'}, span_id=1)
    tool = make_span(
        "get_weather.__call__", {**attrs, "input.value": '{"kwargs": {"city": "P"}}'}, span_id=2
    )
    (f, t), _ = normalize_request(_scoped("openinference.instrumentation.dspy", finish, tool))
    assert (f.kind, f.tool_name) == (RecordKind.OTHER, None)
    assert (t.kind, t.tool_name, t.tool_arguments) == (
        RecordKind.TOOL,
        "get_weather",
        {"city": "P"},
    )


def test_langfuse_observations() -> None:
    agent = make_span(
        "travel-agent",
        {
            "langfuse.observation.type": "agent",
            "langfuse.observation.input": "Weather?",
            "langfuse.observation.output": "Sunny.",
            "session.id": "s1",
        },
        span_id=1,
    )
    output = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "w", "arguments": '{"c": 1}'}}
        ],
    }
    generation = make_span(
        "chat",
        {
            "langfuse.observation.type": "generation",
            "langfuse.observation.input": json.dumps([{"role": "user", "content": "Weather?"}]),
            "langfuse.observation.output": json.dumps(output),
        },
        span_id=2,
        parent=1,
    )
    tool = make_span(
        "w",
        {
            "langfuse.observation.type": "tool",
            "langfuse.observation.input": '{"c": 1}',
            "langfuse.observation.level": "ERROR",
            "langfuse.observation.status_message": "boom",
        },
        span_id=3,
        parent=1,
    )
    (a, g, t), _ = normalize_request(make_request(agent, generation, tool))
    assert (a.kind, a.input_text, a.output_text, a.conversation_id) == (
        RecordKind.TURN,
        "Weather?",
        "Sunny.",
        "s1",
    )
    assert (g.kind, g.input_text) == (RecordKind.MODEL, "Weather?")
    assert [(c.name, c.arguments, c.call_id) for c in g.requested_tool_calls] == [
        ("w", {"c": 1}, "c1")
    ]
    assert (t.kind, t.tool_name, t.tool_arguments, t.error) == (
        RecordKind.TOOL,
        "w",
        {"c": 1},
        "boom",
    )
