"""OpenInference spans built by hand (the real instrumentation is in test_thirdparty_*)."""

from __future__ import annotations

import json

import pytest
from test_normalize_basics import make_request, make_span

from tracepass.collector.normalize import RecordKind, normalize_request
from tracepass.collector.normalize.registry import TOOL_RESPONSES_ATTR

STATE_IN = json.dumps(
    {
        "messages": [
            {"type": "human", "data": {"content": "first"}},
            {"type": "ai", "data": {"content": "ok"}},
            {"type": "human", "data": {"content": [{"type": "text", "text": "second?"}]}},
        ]
    }
)
STATE_OUT = json.dumps(
    {
        "messages": [
            {"type": "human", "data": {"content": "second?"}},
            {"type": "ai", "data": {"content": "", "tool_calls": [{"name": "t", "args": {}}]}},
            {"type": "tool", "data": {"content": "42", "tool_call_id": "x"}},
            {"type": "ai", "data": {"content": "The answer is 42."}},
        ]
    }
)


def test_agent_span_is_turn_with_query_and_answer_from_state() -> None:
    span = make_span(
        "agent",
        {
            "openinference.span.kind": "AGENT",
            "input.value": STATE_IN,
            "input.mime_type": "application/json",
            "output.value": STATE_OUT,
            "output.mime_type": "application/json",
            "session.id": "s1",
            "user.id": "u1",
            "agent.name": "planner",
        },
        parent=9,
    )
    (rec,), _ = normalize_request(make_request(span))
    assert rec.kind is RecordKind.TURN
    assert (rec.input_text, rec.output_text) == ("second?", "The answer is 42.")
    assert (rec.conversation_id, rec.agent_name) == ("s1", "planner")
    assert rec.attributes["user.id"] == "u1"


def test_root_chain_is_turn_nested_chain_is_other() -> None:
    root = make_span(
        "LangGraph",
        {
            "openinference.span.kind": "CHAIN",
            "input.value": '{"messages": [["user", "hi there"]]}',
            "output.value": '{"output": "hello"}',
        },
        span_id=1,
    )
    nested = make_span(
        "RunnableSequence",
        {"openinference.span.kind": "CHAIN", "input.value": STATE_IN},
        span_id=2,
        parent=1,
    )
    records, _ = normalize_request(make_request(root, nested))
    assert [r.kind for r in records] == [RecordKind.TURN, RecordKind.OTHER]
    assert (records[0].input_text, records[0].output_text) == ("hi there", "hello")
    assert records[1].input_text is None  # nested chains are not decoded


def test_langgraph_root_under_foreign_parent_is_turn() -> None:
    graph_root = make_span(
        "LangGraph",
        {
            "openinference.span.kind": "CHAIN",
            "metadata": '{"thread_id": "t", "ls_integration": "langgraph"}',
            "input.value": "plain question",
            "input.mime_type": "text/plain",
        },
        span_id=2,
        parent=1,  # e.g. an HTTP server span
    )
    node = make_span(
        "call_model",
        {
            "openinference.span.kind": "CHAIN",
            "metadata": '{"ls_integration": "langgraph", "langgraph_node": "agent"}',
        },
        span_id=3,
        parent=2,
    )
    records, _ = normalize_request(make_request(graph_root, node))
    assert [r.kind for r in records] == [RecordKind.TURN, RecordKind.OTHER]
    assert records[0].input_text == "plain question"


def test_tool_span() -> None:
    span = make_span(
        "get_weather",
        {
            "openinference.span.kind": "TOOL",
            "tool.name": "get_weather",
            "input.value": '{"city": "Paris"}',
            "output.value": json.dumps(
                {"type": "tool", "data": {"content": "Sunny", "tool_call_id": "call_1"}}
            ),
        },
    )
    (rec,), _ = normalize_request(make_request(span))
    assert rec.kind is RecordKind.TOOL
    assert (rec.tool_name, rec.tool_call_id) == ("get_weather", "call_1")
    assert rec.tool_arguments == {"city": "Paris"}
    assert rec.tool_result == "Sunny"


@pytest.mark.parametrize(
    ("value", "mime", "args", "result"),
    [
        ("Paris", "text/plain", {"_raw": "Paris"}, "12"),
        ("{'city': 'Paris'}", None, {"city": "Paris"}, 12),
    ],
)
def test_tool_span_text_inputs(
    value: str, mime: str | None, args: dict[str, object], result: object
) -> None:
    attrs: dict[str, object] = {
        "openinference.span.kind": "TOOL",
        "tool.name": "t",
        "input.value": value,
        "output.value": "12",
    }
    if mime:
        attrs["input.mime_type"] = mime
        attrs["output.mime_type"] = mime
    (rec,), _ = normalize_request(make_request(make_span("t", attrs)))
    assert rec.tool_arguments == args
    assert rec.tool_result == result


@pytest.mark.parametrize(
    ("value", "args"),
    [
        ({"kwargs": {"city": "Paris"}}, {"city": "Paris"}),
        ({"args": [], "kwargs": {"city": "Paris"}}, {"city": "Paris"}),
        # Positional values or other keys: not the keyword wrapper, kept as they are.
        ({"args": ["Paris"], "kwargs": {}}, {"args": ["Paris"], "kwargs": {}}),
        ({"kwargs": {"a": 1}, "mode": "x"}, {"kwargs": {"a": 1}, "mode": "x"}),
        ({"kwargs": "text"}, {"kwargs": "text"}),
    ],
)
def test_tool_input_keyword_wrapper_is_unwrapped(
    value: dict[str, object], args: dict[str, object]
) -> None:
    # Python instrumentations (DSPy, LlamaIndex) record a tool's bound call as its input.
    attrs = {"openinference.span.kind": "TOOL", "tool.name": "t", "input.value": json.dumps(value)}
    (rec,), _ = normalize_request(make_request(make_span("t", attrs)))
    assert rec.tool_arguments == args


@pytest.mark.parametrize(
    ("span_name", "tool_name"),
    [
        ("get_weather.__call__", "get_weather"),
        ("get_weather.acall", "get_weather"),
        ("get_weather", None),
        (".__call__", None),
    ],
)
def test_tool_without_tool_name_is_named_by_its_span(span_name: str, tool_name: str | None) -> None:
    # DSPy's TOOL spans carry no `tool.name`; their names are `<tool>.__call__`.
    attrs = {"openinference.span.kind": "TOOL", "input.value": "{}"}
    (rec,), _ = normalize_request(make_request(make_span(span_name, attrs)))
    assert rec.tool_name == tool_name


def test_root_chain_input_wrapped_in_one_key_gives_the_query() -> None:
    # DSPy modules record `forward(**input_args)` as {"input_args": {...}}.
    attrs = {
        "openinference.span.kind": "CHAIN",
        "input.value": json.dumps({"input_args": {"question": "Weather?"}}),
        "output.value": json.dumps({"trajectory": {}, "answer": "Sunny."}),
    }
    (rec,), _ = normalize_request(make_request(make_span("ReAct.forward", attrs)))
    assert (rec.kind, rec.input_text, rec.output_text) == (RecordKind.TURN, "Weather?", "Sunny.")


def test_llm_span_flattened_messages() -> None:
    span = make_span(
        "ChatOpenAI",
        {
            "openinference.span.kind": "LLM",
            "llm.input_messages.0.message.role": "system",
            "llm.input_messages.0.message.content": "sys",
            "llm.input_messages.1.message.role": "user",
            "llm.input_messages.1.message.contents.0.message_content.type": "text",
            "llm.input_messages.1.message.contents.0.message_content.text": "what?",
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": "calling",
            "llm.output_messages.0.message.tool_calls.0.tool_call.id": "c1",
            "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "f",
            "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": '{"x": 1}',
            "llm.output_messages.0.message.tool_calls.1.tool_call.function.name": "g",
            "llm.output_messages.0.message.tool_calls.1.tool_call.function.arguments": "bad{",
        },
    )
    (rec,), _ = normalize_request(make_request(span))
    assert rec.kind is RecordKind.MODEL
    assert (rec.input_text, rec.output_text) == ("what?", "calling")
    assert [(c.name, c.arguments, c.call_id) for c in rec.requested_tool_calls] == [
        ("f", {"x": 1}, "c1"),
        ("g", {"_raw": "bad{"}, None),
    ]


def test_llm_span_tool_messages_are_tool_responses() -> None:
    # A hand-rolled loop has no tool spans: its tool messages are the only results.
    span = make_span(
        "ChatCompletion",
        {
            "openinference.span.kind": "LLM",
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.content": "weather?",
            "llm.input_messages.1.message.role": "assistant",
            "llm.input_messages.2.message.role": "tool",
            "llm.input_messages.2.message.tool_call_id": "c1",
            "llm.input_messages.2.message.content": "Sunny",
            "llm.input_messages.3.message.role": "tool",
            "llm.input_messages.3.message.content": "no id: not a response",
        },
    )
    (rec,), _ = normalize_request(make_request(span))
    assert rec.attributes[TOOL_RESPONSES_ATTR] == {"c1": "Sunny"}


@pytest.mark.parametrize("kind", ["RETRIEVER", "EMBEDDING", "RERANKER", "GUARDRAIL", "PROMPT"])
def test_other_kinds(kind: str) -> None:
    (rec,), _ = normalize_request(
        make_request(make_span("x", {"openinference.span.kind": kind}, parent=4))
    )
    assert rec.kind is RecordKind.OTHER
