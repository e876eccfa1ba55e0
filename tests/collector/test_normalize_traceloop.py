"""OpenLLMetry / Traceloop spans built by hand, and the safe Python-repr parser."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_normalize_basics import make_request, make_span

from tracepass.collector.normalize import normalize_request
from tracepass.collector.records import RecordKind, coerce_arguments, pyrepr

TL = "traceloop.association.properties."


def _tool(entity_input: Any, entity_output: Any = None, **extra: Any) -> Any:
    attrs: dict[str, Any] = {
        "traceloop.span.kind": "tool",
        "traceloop.entity.name": "get_weather",
        "traceloop.entity.input": json.dumps(entity_input),
        TL + "thread_id": "th-1",
        **extra,
    }
    if entity_output is not None:
        attrs["traceloop.entity.output"] = json.dumps(entity_output)
    (rec,), _ = normalize_request(make_request(make_span("get_weather.tool", attrs)))
    return rec


def test_langchain_input_str_repr_is_parsed() -> None:
    rec = _tool(
        {"input_str": "{'city': 'Paris', 'days': 2, 'ok': True}", "tags": [], "metadata": {}},
        {
            "output": {
                "lc": 1,
                "type": "constructor",
                "id": ["langchain", "schema", "messages", "ToolMessage"],
                "kwargs": {"content": "Sunny", "tool_call_id": "call_9", "type": "tool"},
            },
            "kwargs": {"name": "get_weather"},
        },
    )
    assert rec.kind is RecordKind.TOOL
    assert rec.tool_name == "get_weather"
    assert rec.tool_arguments == {"city": "Paris", "days": 2, "ok": True}
    assert (rec.tool_result, rec.tool_call_id) == ("Sunny", "call_9")
    assert rec.conversation_id == "th-1"


def test_inputs_wrapper_preferred_and_plain_output() -> None:
    rec = _tool(
        {"input_str": "{'city': 'X'}", "inputs": {"city": "Paris"}, "kwargs": {}},
        {"output": "Sunny", "kwargs": {}},
    )
    assert rec.tool_arguments == {"city": "Paris"}
    assert rec.tool_result == "Sunny"


def test_unparseable_input_str_kept_raw() -> None:
    rec = _tool({"input_str": "Paris, please", "tags": []})
    assert rec.tool_arguments == {"_raw": "Paris, please"}
    rec = _tool({"input_str": "HumanMessage(content='x')", "tags": []})
    assert rec.tool_arguments == {"_raw": "HumanMessage(content='x')"}


def test_decorator_tool_args() -> None:
    rec = _tool({"args": ["Paris"], "kwargs": {"unit": "C"}}, "Sunny")
    assert rec.tool_arguments == {"unit": "C", "_args": ["Paris"]}
    assert rec.tool_result == "Sunny"


def test_semconv_tool_name_and_id_win() -> None:
    rec = _tool(
        {"input_str": "{'a': 1}", "tags": []},
        **{"gen_ai.tool.name": "real_name", "gen_ai.tool.call.id": "id-1"},
    )
    assert (rec.tool_name, rec.tool_call_id) == ("real_name", "id-1")


def test_tool_with_a_parameter_named_inputs_is_not_unwrapped() -> None:
    assert coerce_arguments('{"inputs": {"a": 1}}') == {"inputs": {"a": 1}}
    assert coerce_arguments('{"inputs": {"a": 1}, "kwargs": {}}') == {"a": 1}


@pytest.mark.parametrize("kind", ["workflow", "agent"])
def test_workflow_and_agent_are_turns(kind: str) -> None:
    span = make_span(
        "LangGraph.workflow",
        {
            "traceloop.span.kind": kind,
            "traceloop.entity.name": "support_bot",
            "traceloop.entity.input": json.dumps(
                {"inputs": {"messages": [["user", "Where is my order?"]]}, "tags": []}
            ),
            "traceloop.entity.output": json.dumps(
                {
                    "outputs": {
                        "messages": [
                            {
                                "lc": 1,
                                "type": "constructor",
                                "id": ["langchain", "schema", "messages", "HumanMessage"],
                                "kwargs": {"content": "Where is my order?"},
                            },
                            {
                                "lc": 1,
                                "type": "constructor",
                                "id": ["langchain", "schema", "messages", "AIMessage"],
                                "kwargs": {"content": "It ships today."},
                            },
                        ]
                    },
                    "kwargs": {},
                }
            ),
            TL + "session_id": "sess",
            TL + "thread_id": "ignored",
        },
    )
    (rec,), _ = normalize_request(make_request(span, resource={"service.name": "svc"}))
    assert rec.kind is RecordKind.TURN
    assert (rec.input_text, rec.output_text) == ("Where is my order?", "It ships today.")
    assert (rec.agent_name, rec.service_name, rec.conversation_id) == ("support_bot", "svc", "sess")


def test_decorated_workflow_args_and_string_output() -> None:
    span = make_span(
        "chat.workflow",
        {
            "traceloop.span.kind": "workflow",
            "traceloop.entity.name": "chat",
            "traceloop.entity.input": json.dumps({"args": ["hello?"], "kwargs": {}}),
            "traceloop.entity.output": json.dumps("hi!"),
        },
    )
    (rec,), _ = normalize_request(make_request(span))
    assert (rec.input_text, rec.output_text) == ("hello?", "hi!")


def test_task_is_other_and_chat_without_kind_is_model() -> None:
    task = make_span(
        "x.task", {"traceloop.span.kind": "task", "gen_ai.operation.name": "execute_task"}
    )
    chat = make_span(
        "FakeModel.chat",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": '[{"role": "user", "parts": [{"type": "text", "content": "q"}]}]',
        },
        span_id=2,
    )
    records, _ = normalize_request(make_request(task, chat))
    assert [r.kind for r in records] == [RecordKind.OTHER, RecordKind.MODEL]
    assert records[1].input_text == "q"


# --------------------------------------------------------------------------- pyrepr

_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.text(max_size=20)
    | st.floats(allow_nan=False, allow_infinity=False)
)
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


@given(st.dictionaries(st.text(max_size=10), _values, max_size=6))
def test_repr_of_any_literal_dict_roundtrips(value: dict[str, Any]) -> None:
    assert pyrepr.literal(repr(value)) == value
    assert coerce_arguments(json.dumps({"input_str": repr(value), "tags": []})) == value


@pytest.mark.parametrize(
    "text",
    [
        "__import__('os').system('echo pwned')",
        "open('/etc/passwd').read()",
        "{'a': (lambda: 1)()}",
        "[" * 5000,
        "1 + " * 100 + "1",
        "x" * 100_000,
    ],
)
def test_repr_never_evaluates_code_and_is_bounded(text: str) -> None:
    assert pyrepr.literal(text) is pyrepr.NOT_PARSED
    assert coerce_arguments(json.dumps({"input_str": text, "tags": []})) == {"_raw": text}
