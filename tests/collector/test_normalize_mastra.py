"""Mastra's tracing through its `OtelExporter` (scope `@mastra/otel-exporter`): GenAI
semconv spans whose `chat` spans carry no input messages, so the query comes from the
agent run's `mastra.agent_run.input`. The real spans are in the corpus
(tests/frameworks/corpus/mastra_otel.*); these pin the input shapes it does not show."""

from __future__ import annotations

import json

import pytest
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from test_normalize_basics import make_request, make_span

from tracepass.collector.normalize import RecordKind, normalize_request
from tracepass.collector.normalize.adapters.mastra import run_query
from tracepass.collector.normalize.registry import ADAPTERS_ATTR

SCOPE = "@mastra/otel-exporter"


def _agent_run(run_input: str) -> Span:
    return make_span(
        "invoke_agent travel-agent",
        {
            "gen_ai.operation.name": "invoke_agent",
            "mastra.span.type": "agent_run",
            "gen_ai.agent.name": "travel-agent",
            "gen_ai.conversation.id": "thread-1",
            "mastra.agent_run.input": run_input,
            "mastra.agent_run.output": json.dumps({"text": "Cold.", "files": []}),
        },
    )


def test_a_text_input_is_the_query() -> None:
    (rec,), _ = normalize_request(make_request(_agent_run("Weather in Oslo?"), scope=SCOPE))
    assert rec.kind is RecordKind.TURN
    assert rec.input_text == "Weather in Oslo?"
    assert rec.conversation_id == "thread-1"
    assert rec.attributes[ADAPTERS_ATTR] == ["mastra"]


def test_a_message_list_input_gives_its_last_user_message() -> None:
    messages = [
        {"role": "user", "content": "old"},
        {"role": "assistant", "content": "old answer"},
        {"role": "user", "content": [{"type": "text", "text": "Weather in Oslo?"}]},
    ]
    (rec,), _ = normalize_request(make_request(_agent_run(json.dumps(messages)), scope=SCOPE))
    assert rec.input_text == "Weather in Oslo?"


def test_other_scopes_are_left_alone() -> None:
    (rec,), _ = normalize_request(make_request(_agent_run("Weather in Oslo?"), scope="other"))
    assert ADAPTERS_ATTR not in rec.attributes or "mastra" not in rec.attributes[ADAPTERS_ATTR]


@pytest.mark.parametrize(
    ("raw", "query"),
    [
        ("plain text", "plain text"),
        ("42", "42"),
        (json.dumps({"messages": [{"role": "user", "content": "hi"}]}), "hi"),
        (json.dumps([{"role": "assistant", "content": "no user"}]), None),
        ("", None),
        (None, None),
    ],
)
def test_run_query(raw: object, query: str | None) -> None:
    assert run_query(raw) == query
