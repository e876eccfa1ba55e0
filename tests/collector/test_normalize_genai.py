"""tracepass's own spans and the OTel GenAI semantic conventions."""

from __future__ import annotations

import json

import pytest
from test_normalize_basics import hexid, make_request, make_span, to_any

from tracepass.collector.normalize import RecordKind, normalize_request
from tracepass.collector.normalize.registry import TOOL_RESPONSES_ATTR

CONV = "conv-7"


def _turn_attrs(**extra: object) -> dict[str, object]:
    return {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "weather",
        "gen_ai.agent.version": "3",
        "gen_ai.conversation.id": CONV,
        "tracepass.reference.id": "ref-1",
        "gen_ai.input.messages": [
            {"role": "system", "parts": [{"type": "text", "content": "be nice"}]},
            {"role": "user", "parts": [{"type": "text", "content": "old question"}]},
            {"role": "assistant", "parts": [{"type": "text", "content": "old answer"}]},
            {"role": "user", "parts": [{"type": "text", "content": "Weather in Oslo?"}]},
        ],
        "gen_ai.output.messages": [
            {
                "role": "assistant",
                "parts": [{"type": "text", "content": "Cold."}],
                "finish_reason": "stop",
            }
        ],
        **extra,
    }


def test_tracepass_turn_tool_and_end() -> None:
    turn = make_span("invoke_agent weather", _turn_attrs(), span_id=1)
    tool = make_span(
        "execute_tool get_weather",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "get_weather",
            "gen_ai.tool.call.id": "c1",
            "gen_ai.tool.call.arguments": '{"city": "Oslo", "days": 2}',
            "gen_ai.tool.call.result": '{"temp": -3}',
            "gen_ai.conversation.id": CONV,
        },
        span_id=2,
        parent=1,
    )
    end = make_span(
        "tracepass.conversation.end",
        {
            "tracepass.conversation.end": True,
            "gen_ai.conversation.id": CONV,
            "tracepass.reference.id": "ref-1",
            "tracepass.conversation.turns": 3,
        },
        span_id=3,
    )
    records, rejections = normalize_request(make_request(turn, tool, end))
    assert rejections == []
    t, c, e = records
    assert t.kind is RecordKind.TURN
    assert (t.input_text, t.output_text) == ("Weather in Oslo?", "Cold.")
    assert (t.agent_name, t.agent_version, t.conversation_id, t.reference_id) == (
        "weather",
        "3",
        CONV,
        "ref-1",
    )
    assert t.attributes["tracepass.convention"] == "genai"
    assert c.kind is RecordKind.TOOL
    assert (c.tool_name, c.tool_call_id) == ("get_weather", "c1")
    assert c.tool_arguments == {"city": "Oslo", "days": 2}
    assert c.tool_result == {"temp": -3}
    assert c.error is None
    assert c.parent_span_id == hexid(1)
    assert e.kind is RecordKind.END
    assert e.attributes["tracepass.conversation.turns"] == 3
    assert (e.conversation_id, e.reference_id) == (CONV, "ref-1")


def test_end_marker_recognised_by_flag_or_name() -> None:
    by_flag = make_span("renamed", {"tracepass.conversation.end": True}, span_id=1)
    by_name = make_span(
        "tracepass.conversation.end", {"tracepass.conversation.turns": "2"}, span_id=2
    )
    bad_turns = make_span(
        "tracepass.conversation.end", {"tracepass.conversation.turns": "many"}, span_id=3
    )
    records, _ = normalize_request(make_request(by_flag, by_name, bad_turns))
    assert [r.kind for r in records] == [RecordKind.END] * 3
    assert records[1].attributes["tracepass.conversation.turns"] == 2
    assert "tracepass.conversation.turns" not in records[2].attributes


def test_tool_error_and_truncated_arguments() -> None:
    span = make_span(
        "execute_tool search",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "search",
            "gen_ai.tool.call.arguments": '{"query": "very long te…[truncated]',
            "tracepass.content.truncated": True,
            "error.type": "TimeoutError",
        },
        error="search backend timed out",
    )
    (rec,), _ = normalize_request(make_request(span))
    assert rec.tool_arguments == {"_raw": '{"query": "very long te…[truncated]'}
    assert rec.error == "search backend timed out"
    assert rec.attributes["tracepass.content.truncated"] is True
    assert rec.attributes["error.type"] == "TimeoutError"


def test_error_without_message_uses_error_type() -> None:
    span = make_span(
        "execute_tool x",
        {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "x", "error.type": "E"},
        error="",
    )
    (rec,), _ = normalize_request(make_request(span))
    assert rec.error == "E"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ("[1, 2]", {"_raw": "[1, 2]"}),
        ("not json", {"_raw": "not json"}),
        ("", {}),
        ({"a": [1, 2]}, {"a": [1, 2]}),  # structured kvlist attribute
        ("{'a': 1}", {"a": 1}),  # python repr (LangChain str(dict))
    ],
)
def test_tool_argument_shapes(args: object, expected: dict[str, object]) -> None:
    attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t"}
    span = make_span("execute_tool t", attrs)
    if isinstance(args, dict):
        span.attributes.add(key="gen_ai.tool.call.arguments").value.CopyFrom(to_any(args))
    else:
        span.attributes.add(key="gen_ai.tool.call.arguments").value.string_value = str(args)
    (rec,), _ = normalize_request(make_request(span))
    assert rec.tool_arguments == expected


def test_result_that_is_not_json_stays_text() -> None:
    span = make_span(
        "execute_tool t",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "t",
            "gen_ai.tool.call.result": "Sunny",
        },
    )
    (rec,), _ = normalize_request(make_request(span))
    assert rec.tool_result == "Sunny"
    assert rec.tool_arguments == {}


@pytest.mark.parametrize("operation", ["chat", "text_completion", "generate_content"])
def test_chat_span_tool_calls_from_output_parts(operation: str) -> None:
    span = make_span(
        f"{operation} gpt",
        {
            "gen_ai.operation.name": operation,
            "gen_ai.request.model": "gpt-x",
            "gen_ai.input.messages": [
                {"role": "user", "parts": [{"type": "text", "content": "2+3 and weather?"}]},
                {
                    "role": "assistant",
                    "parts": [{"type": "tool_call", "id": "old", "name": "add", "arguments": {}}],
                },
                {
                    "role": "tool",
                    "parts": [{"type": "tool_call_response", "id": "old", "response": "5"}],
                },
            ],
            "gen_ai.output.messages": [
                {
                    "role": "assistant",
                    "parts": [
                        {"type": "text", "content": "Let me check."},
                        {
                            "type": "tool_call",
                            "id": "c9",
                            "name": "get_weather",
                            "arguments": {"city": "Rome"},
                        },
                        {
                            "type": "tool_call",
                            "id": "c10",
                            "name": "add",
                            "arguments": '{"a": 2, "b": 3}',
                        },
                    ],
                    "finish_reason": "tool_call",
                }
            ],
        },
    )
    (rec,), _ = normalize_request(make_request(span))
    assert rec.kind is RecordKind.MODEL
    assert rec.input_text == "2+3 and weather?"
    assert rec.output_text == "Let me check."
    assert [(c.name, c.arguments, c.call_id) for c in rec.requested_tool_calls] == [
        ("get_weather", {"city": "Rome"}, "c9"),
        ("add", {"a": 2, "b": 3}, "c10"),
    ]
    assert rec.attributes["gen_ai.request.model"] == "gpt-x"


def test_legacy_flattened_prompt_and_completion() -> None:
    span = make_span(
        "openai.chat",
        {
            "llm.request.type": "chat",
            "gen_ai.prompt.0.role": "system",
            "gen_ai.prompt.0.content": "sys",
            "gen_ai.prompt.1.role": "user",
            "gen_ai.prompt.1.content": "hello?",
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": "",
            "gen_ai.completion.0.tool_calls.0.name": "lookup",
            "gen_ai.completion.0.tool_calls.0.arguments": '{"q": "x"}',
            "gen_ai.completion.0.tool_calls.0.id": "t1",
        },
    )
    (rec,), _ = normalize_request(make_request(span))
    assert rec.kind is RecordKind.MODEL
    assert rec.input_text == "hello?"
    assert rec.output_text is None
    assert [(c.name, c.arguments, c.call_id) for c in rec.requested_tool_calls] == [
        ("lookup", {"q": "x"}, "t1")
    ]


def test_older_role_content_messages_are_read() -> None:
    span = make_span(
        "chat m",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": json.dumps([{"role": "user", "content": "hi"}]),
            "gen_ai.output.messages": json.dumps([{"role": "assistant", "content": "yo"}]),
        },
    )
    (rec,), _ = normalize_request(make_request(span))
    assert (rec.input_text, rec.output_text) == ("hi", "yo")


@pytest.mark.parametrize("operation", ["create_agent", "embeddings", "execute_task", "unknown"])
def test_other_operations_are_other(operation: str) -> None:
    (rec,), _ = normalize_request(
        make_request(make_span("x", {"gen_ai.operation.name": operation}))
    )
    assert rec.kind is RecordKind.OTHER


def test_unparseable_messages_give_no_text() -> None:
    span = make_span(
        "invoke_agent a",
        {"gen_ai.operation.name": "invoke_agent", "gen_ai.input.messages": '[{"role": "us'},
    )
    (rec,), _ = normalize_request(make_request(span))
    assert rec.kind is RecordKind.TURN
    assert rec.input_text is None


# --------------------------------------------------------------------------- ids / agent


def test_conversation_id_resolution_order() -> None:
    tl = "traceloop.association.properties."
    cases: list[tuple[dict[str, object], str | None]] = [
        ({"gen_ai.conversation.id": "a", "session.id": "b"}, "a"),
        ({"session.id": "b", tl + "session_id": "c"}, "b"),
        ({tl + "session_id": "c", tl + "conversation_id": "d"}, "c"),
        ({tl + "conversation_id": "d", tl + "thread_id": "e"}, "d"),
        ({tl + "thread_id": "e", "app.chat": "f"}, "e"),
        ({"app.chat": "f"}, "f"),
        ({"app.chat": 12}, "12"),
        ({"gen_ai.conversation.id": "", "session.id": "b"}, "b"),
        ({}, "from-resource"),
    ]
    spans = [make_span("s", attrs, span_id=i + 1) for i, (attrs, _) in enumerate(cases)]
    request = make_request(*spans, resource={"service.name": "svc", "app.chat": "from-resource"})
    records, _ = normalize_request(request, conversation_id_keys=["app.chat"])
    assert [r.conversation_id for r in records] == [want for _, want in cases]
    records, _ = normalize_request(make_request(make_span("s")))
    assert records[0].conversation_id is None


def test_agent_version_fallbacks() -> None:
    spans = [
        make_span("a", {"gen_ai.agent.version": "1", "tracepass.agent.version": "2"}, span_id=1),
        make_span("b", {"tracepass.agent.version": "2"}, span_id=2),
        make_span("c", {}, span_id=3),
    ]
    records, _ = normalize_request(
        make_request(*spans, resource={"service.name": "svc", "service.version": "9"})
    )
    assert [r.agent_version for r in records] == ["1", "2", "9"]


def test_tool_span_without_operation_name_is_still_a_tool() -> None:
    span = make_span(
        "get_weather",
        {"gen_ai.tool.name": "get_weather", "gen_ai.tool.call.arguments": '{"city": "Oslo"}'},
    )
    (rec,), _ = normalize_request(make_request(span))
    assert rec.kind is RecordKind.TOOL
    assert rec.tool_name == "get_weather"
    assert rec.tool_arguments == {"city": "Oslo"}


def test_legacy_prompt_tool_messages_are_tool_responses() -> None:
    span = make_span(
        "openai.chat",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.prompt.0.role": "user",
            "gen_ai.prompt.0.content": "weather?",
            "gen_ai.prompt.1.role": "tool",
            "gen_ai.prompt.1.tool_call_id": "c1",
            "gen_ai.prompt.1.content": '{"temp": 21}',
        },
    )
    (rec,), _ = normalize_request(make_request(span))
    assert rec.kind is RecordKind.MODEL
    assert rec.attributes[TOOL_RESPONSES_ATTR] == {"c1": '{"temp": 21}'}
