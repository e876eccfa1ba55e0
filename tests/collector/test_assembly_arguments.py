"""Tool calls completed at build time: arguments from the issuing model's request, results
from a later model input, one call seen by two instrumentations, answer-carrying tools."""

from __future__ import annotations

import json
from typing import Any

from tracepass.collector.assembly import build_conversation
from tracepass.collector.normalize.messages import make_tool_call, tool_responses
from tracepass.collector.normalize.registry import (
    ROLE_ANSWER,
    ROLE_ATTR,
    TOOL_RESPONSES_ATTR,
)
from tracepass.collector.records import RecordKind, SpanRecord
from tracepass.evaluator.models import ToolCall

TRACE = "ab" * 16


def rec(
    span: int, kind: RecordKind, start: int, parent: int | None = 1, **fields: Any
) -> SpanRecord:
    return SpanRecord(
        trace_id=TRACE,
        span_id=f"{span:016x}",
        parent_span_id=None if parent is None else f"{parent:016x}",
        kind=kind,
        name=fields.pop("name", kind.value),
        start_ns=start,
        end_ns=start + 5,
        conversation_id="c",
        **fields,
    )


def turn(*members: SpanRecord, **fields: Any) -> list[ToolCall]:
    root = rec(1, RecordKind.TURN, 0, parent=None, input_text="q", **fields)
    (t,) = build_conversation("c", [root, *members]).turns
    return list(t.tool_calls)


def model(span: int, start: int, *calls: tuple[str, dict[str, Any], str | None]) -> SpanRecord:
    return rec(
        span,
        RecordKind.MODEL,
        start,
        requested_tool_calls=tuple(make_tool_call(n, a, i) for n, a, i in calls),
    )


def tool(
    span: int, start: int, name: str, args: dict[str, Any] | None, **fields: Any
) -> SpanRecord:
    return rec(span, RecordKind.TOOL, start, tool_name=name, tool_arguments=args, **fields)


def test_bare_string_arguments_come_from_the_model_request_by_name_and_value() -> None:
    # LangGraph + OpenInference: single-argument tools record `input.value = "Paris"`;
    # parallel calls without ids: the request whose value is that text is chosen.
    calls = turn(
        model(
            2, 1, ("get_weather", {"city": "Paris"}, None), ("get_weather", {"city": "Rome"}, None)
        ),
        tool(3, 10, "get_weather", {"_raw": "Rome"}),
        tool(4, 11, "get_weather", {"_raw": "Paris"}),
    )
    assert [(c.arguments, c.arguments_source) for c in calls] == [
        ({"city": "Rome"}, "model_request"),
        ({"city": "Paris"}, "model_request"),
    ]


def test_empty_arguments_are_matched_by_call_id_first() -> None:
    calls = turn(
        model(2, 1, ("book", {"id": "A"}, "call_a"), ("book", {"id": "B"}, "call_b")),
        tool(3, 10, "book", {}, tool_call_id="call_b"),
        tool(4, 11, "book", None),
    )
    assert [(c.arguments, c.call_id) for c in calls] == [
        ({"id": "B"}, "call_b"),
        ({"id": "A"}, "call_a"),
    ]


def test_span_arguments_are_kept_and_a_later_request_is_never_used() -> None:
    calls = turn(
        tool(3, 10, "book", {"id": "span"}),
        tool(4, 11, "other", {}),
        model(2, 20, ("other", {"x": 1}, None)),  # issued after the tool started: not its request
    )
    assert [(c.arguments, c.arguments_source) for c in calls] == [
        ({"id": "span"}, "attribute"),
        ({}, "attribute"),
    ]


def test_results_from_a_later_model_input_unwrap_result_and_error_responses() -> None:
    later = rec(
        5,
        RecordKind.MODEL,
        30,
        attributes={
            TOOL_RESPONSES_ATTR: {"call_a": {"result": "ok"}, "call_b": {"error": "sold out"}}
        },
    )
    calls = turn(
        tool(3, 10, "book", {"id": "A"}, tool_call_id="call_a"),
        tool(4, 11, "book", {"id": "B"}, tool_call_id="call_b", error="TOOL_ERROR"),
        later,
    )
    assert [(c.result, c.error) for c in calls] == [("ok", None), (None, "sold out")]


def test_json_text_responses_of_a_stack_without_tool_spans_unwrap_too() -> None:
    # A hand-rolled chat-completions loop: no tool spans; the `tool` messages it sends
    # back are text, the failing call's `{"error": …}` among them.
    later = rec(
        5,
        RecordKind.MODEL,
        30,
        attributes={
            TOOL_RESPONSES_ATTR: {"call_a": '{"result": 5}', "call_b": '{"error": "sold out"}'}
        },
    )
    calls = turn(
        model(2, 1, ("book", {"id": "A"}, "call_a"), ("book", {"id": "B"}, "call_b")), later
    )
    assert [(c.result, c.error) for c in calls] == [(5, None), (None, "sold out")]


def test_repeated_made_up_ids_find_the_response_to_their_own_arguments() -> None:
    # google-genai's instrumentation numbers calls per message: a retry reuses the id.
    history = json.dumps(
        [
            {"role": "user", "parts": [{"type": "text", "content": "book"}]},
            *(
                message
                for flight, response in (("A", {"error": "sold out"}), ("B", {"result": "ok"}))
                for message in (
                    {
                        "role": "assistant",
                        "parts": [
                            {
                                "type": "tool_call",
                                "id": "book_0",
                                "name": "book",
                                "arguments": {"id": flight},
                            }
                        ],
                    },
                    {
                        "role": "user",
                        "parts": [
                            {"type": "tool_call_response", "id": "book_0", "response": response}
                        ],
                    },
                )
            ),
        ]
    )
    later = rec(5, RecordKind.MODEL, 30, attributes={TOOL_RESPONSES_ATTR: tool_responses(history)})
    calls = turn(
        model(2, 1, ("book", {"id": "A"}, "book_0")),
        model(3, 10, ("book", {"id": "B"}, "book_0")),
        later,
    )
    assert [(c.arguments, c.result, c.error) for c in calls] == [
        ({"id": "A"}, None, "sold out"),
        ({"id": "B"}, "ok", None),
    ]


def test_responses_whose_ids_no_request_has_answer_the_oldest_unanswered_request() -> None:
    # OpenLLMetry on the Responses API: request ids are item ids (`fc_…`), response ids
    # the `call_…` ids; in the history each response follows its request.
    history = json.dumps(
        [
            {
                "role": "assistant",
                "parts": [
                    {"type": "tool_call", "id": f"fc_{c}", "name": "w", "arguments": {"c": c}}
                    for c in ("a", "b")
                ],
            },
            *(
                {
                    "role": "tool",
                    "parts": [{"type": "tool_call_response", "id": f"call_{c}", "response": c}],
                }
                for c in ("a", "b")
            ),
        ]
    )
    later = rec(5, RecordKind.MODEL, 30, attributes={TOOL_RESPONSES_ATTR: tool_responses(history)})
    calls = turn(model(2, 1, ("w", {"c": "a"}, "fc_a"), ("w", {"c": "b"}, "fc_b")), later)
    assert [(c.call_id, c.result) for c in calls] == [("fc_a", "a"), ("fc_b", "b")]


def test_one_call_seen_by_two_instrumentations_is_one_call() -> None:
    outer = tool(3, 10, "book", {"id": "A"}, tool_result="done")
    inner = rec(4, RecordKind.TOOL, 11, parent=3, tool_name="book", tool_call_id="c1", error="boom")
    calls = turn(outer, inner)
    assert [(c.arguments, c.result, c.call_id, c.error) for c in calls] == [
        ({"id": "A"}, "done", "c1", "boom")
    ]


def test_answer_carrying_record_is_the_answer_when_the_turn_has_none() -> None:
    answer = rec(3, RecordKind.OTHER, 10, output_text="Final.", attributes={ROLE_ATTR: ROLE_ANSWER})
    last_model = rec(2, RecordKind.MODEL, 20, output_text="model text")
    root = rec(1, RecordKind.TURN, 0, parent=None, input_text="q")
    (t,) = build_conversation("c", [root, answer, last_model]).turns
    assert t.answer == "Final."
    assert t.tool_calls == ()


def test_a_trace_of_setup_spans_only_is_no_turn() -> None:
    setup = SpanRecord(
        trace_id="cd" * 16,
        span_id="1" * 16,
        parent_span_id=None,
        kind=RecordKind.OTHER,
        name="create_agent",
        start_ns=0,
        end_ns=1,
    )
    assert build_conversation("c", [setup]).turns == ()
