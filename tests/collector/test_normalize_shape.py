"""The shape reader (normalize/shape.py) and its use where no convention read a span
(normalize/shape_fill.py): every message shape it names, and its bounds."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_normalize_basics import make_request, make_span

from tracepass.collector.normalize import RecordKind, normalize_request
from tracepass.collector.normalize.shape import MAX_CHARS, MAX_NODES, read_shape, read_values
from tracepass.collector.normalize.shape_fill import SHAPE_UNREAD_ATTR


def _dumps(value: Any) -> str:
    return json.dumps(value)


def test_openai_chat_request_and_response() -> None:
    reading = read_shape(
        {
            "request_data": _dumps(
                {
                    "messages": [
                        {"role": "system", "content": "be brief"},
                        {"role": "user", "content": "weather in Paris?"},
                    ]
                }
            ),
            "response_data": _dumps(
                {
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": "c1",
                                "type": "function",
                                "function": {
                                    "name": "get_weather",
                                    "arguments": '{"city": "Paris"}',
                                },
                            }
                        ],
                    }
                }
            ),
        }
    )
    assert reading.query == "weather in Paris?"
    assert reading.answer is None
    ((call),) = reading.tool_calls
    assert (call.name, call.arguments, call.call_id) == ("get_weather", {"city": "Paris"}, "c1")


def test_anthropic_tool_use_and_an_is_error_result() -> None:
    reading = read_shape(
        {
            "input": _dumps(
                [
                    {"role": "user", "content": [{"type": "text", "text": "book FL-404"}]},
                    {
                        "role": "assistant",
                        "content": [
                            {
                                "type": "tool_use",
                                "id": "t1",
                                "name": "book",
                                "input": {"id": "FL-404"},
                            }
                        ],
                    },
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "tool_result",
                                "tool_use_id": "t1",
                                "content": "sold out",
                                "is_error": True,
                            }
                        ],
                    },
                ]
            ),
            "output": _dumps(
                {"role": "assistant", "content": [{"type": "text", "text": "Sorry."}]}
            ),
        }
    )
    assert reading.query == "book FL-404"
    assert reading.answer == "Sorry."
    assert reading.tool_results == {"t1": "sold out"}
    assert reading.tool_errors == {"t1": "sold out"}


def test_gemini_and_responses_shapes() -> None:
    gemini = read_shape(
        {
            "gen_ai.request": _dumps({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}),
            "gen_ai.response": _dumps(
                {
                    "candidates": [
                        {
                            "content": {
                                "role": "model",
                                "parts": [{"functionCall": {"name": "f", "args": {"a": 1}}}],
                            }
                        }
                    ]
                }
            ),
        }
    )
    assert gemini.query == "hi"
    assert [(c.name, c.arguments) for c in gemini.tool_calls] == [("f", {"a": 1})]
    responses = read_shape(
        {
            "raw_input": _dumps(
                [
                    {"role": "user", "content": "q"},
                    {"type": "function_call", "name": "f", "arguments": "{}", "call_id": "x"},
                    {"type": "function_call_output", "call_id": "x", "output": "42"},
                ]
            ),
            "response": _dumps(
                {
                    "output": [
                        {
                            "type": "message",
                            "role": "assistant",
                            "content": [{"type": "output_text", "text": "It is 42."}],
                        }
                    ]
                }
            ),
        }
    )
    assert (responses.query, responses.answer) == ("q", "It is 42.")
    assert responses.tool_results == {"x": "42"}


def test_langchain_tool_message_with_status_error_and_mcp_results() -> None:
    langchain = read_values(
        [
            (
                "gen_ai.completion",
                _dumps(
                    {
                        "output": {
                            "type": "tool",
                            "tool_call_id": "c9",
                            "content": [{"type": "text", "text": "Error: sold out"}],
                            "status": "error",
                        }
                    }
                ),
            )
        ]
    )
    assert langchain.own_result == ("Error: sold out", "Error: sold out")
    mcp = read_values(
        [("tool.result", _dumps({"content": [{"type": "text", "text": "boom"}], "isError": True}))]
    )
    assert mcp.own_result == ("boom", "boom")
    ok = read_values(
        [
            (
                "tool.result",
                _dumps(
                    {
                        "content": [{"type": "text", "text": "{}"}],
                        "structuredContent": {"result": [1, 2]},
                        "isError": False,
                    }
                ),
            )
        ]
    )
    assert ok.own_result == ([1, 2], None)


def test_flattened_messages_of_any_prefix() -> None:
    reading = read_shape(
        {
            "acme.prompt.0.role": "user",
            "acme.prompt.0.content": "hello",
            "acme.completion.0.role": "assistant",
            "acme.completion.0.content": "hi there",
        }
    )
    assert (reading.query, reading.answer) == ("hello", "hi there")


def test_an_unclaimed_span_with_a_model_exchange_becomes_a_model_call() -> None:
    span = make_span(
        "acme.llm",
        {
            "acme.input": _dumps([{"role": "user", "content": "q"}]),
            "acme.output": _dumps([{"role": "assistant", "content": "a"}]),
        },
    )
    (rec,), _ = normalize_request(make_request(span))
    assert rec.kind is RecordKind.MODEL
    assert (rec.input_text, rec.output_text) == ("q", "a")
    assert rec.attributes["tracepass.sources"] == {"input_text": "shape", "output_text": "shape"}


def test_a_tool_whose_payload_flags_an_error_reads_as_failed() -> None:
    span = make_span(
        "execute_tool book",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "book",
            "gen_ai.tool.call.result": _dumps(
                {"content": [{"type": "text", "text": "sold out"}], "isError": True}
            ),
        },
    )
    (rec,), _ = normalize_request(make_request(span))
    assert rec.kind is RecordKind.TOOL
    assert rec.error == "sold out"


def test_transfer_tools_are_hand_offs() -> None:
    span = make_span(
        "execute_tool transfer_to_booking_agent",
        {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "transfer_to_booking_agent"},
    )
    (rec,), _ = normalize_request(make_request(span))
    assert rec.kind is RecordKind.OTHER
    assert rec.agent_name == "booking_agent"
    assert rec.attributes["tracepass.role"] == "handoff"


# --------------------------------------------------------------------------- bounds


def test_a_value_past_the_size_bound_is_reported_not_read() -> None:
    huge = _dumps([{"role": "user", "content": "x" * (MAX_CHARS + 1)}])
    reading = read_shape({"acme.input": huge})
    assert reading.query is None
    assert reading.unread == ["acme.input"]
    span = make_span("acme", {"gen_ai.operation.name": "chat", "acme.input": huge})
    (rec,), _ = normalize_request(make_request(span))
    assert rec.attributes[SHAPE_UNREAD_ATTR] == ("acme.input",)


def test_a_wide_value_stops_at_the_node_budget() -> None:
    wide = [{"k": i} for i in range(MAX_NODES + 10)] + [{"role": "user", "content": "late"}]
    reading = read_values([("acme.input", wide)])
    assert reading.query is None  # past the budget: not reached
    assert reading.unread == ["acme.input"]


def test_deep_nesting_neither_recurses_nor_raises() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    assert read_shape({"acme.input": deep}).query is None
    nested: Any = {"role": "user", "content": "deep"}
    for _ in range(5_000):
        nested = {"wrap": [nested]}
    assert read_values([("acme.input", nested)]).query is None  # below MAX_DEPTH: not read


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=6)
        | st.dictionaries(
            st.sampled_from(
                ["role", "content", "type", "text", "tool_calls", "parts", "isError", "status", "x"]
            ),
            children,
            max_size=6,
        )
    ),
    max_leaves=60,
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.dictionaries(st.text(max_size=30), json_values | json_values.map(json.dumps), max_size=8))
def test_any_json_never_raises_and_stays_within_its_bounds(attrs: dict[str, Any]) -> None:
    reading = read_shape(attrs)
    assert len(reading.unread) <= 8
    assert reading.query is None or isinstance(reading.query, str)
    assert reading.answer is None or isinstance(reading.answer, str)
    span = make_span("x", {k: v for k, v in attrs.items() if isinstance(v, str)})
    records, _ = normalize_request(make_request(span))
    assert len(records) == 1
