"""CAMEL through the OpenAI client's instrumentation: a tool result CAMEL sent as
`Tool execution failed: …` is the call's error. The real spans are in the corpus
(tests/frameworks/corpus/camel_openinference_openai.*)."""

from __future__ import annotations

from opentelemetry.proto.trace.v1.trace_pb2 import Span
from test_normalize_basics import make_request, make_span

from tracepass.collector.normalize import RecordKind, normalize_request
from tracepass.collector.normalize.registry import ADAPTERS_ATTR, TOOL_RESPONSES_ATTR

SCOPE = "openinference.instrumentation.openai"
FAILED = "Tool execution failed: Error executing tool 'book': sold out"


def _llm_span(*results: tuple[str, str]) -> Span:
    attrs: dict[str, object] = {
        "openinference.span.kind": "LLM",
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": "Book it",
    }
    for n, (call_id, text) in enumerate(results, start=1):
        attrs[f"llm.input_messages.{n}.message.role"] = "tool"
        attrs[f"llm.input_messages.{n}.message.tool_call_id"] = call_id
        attrs[f"llm.input_messages.{n}.message.content"] = text
    return make_span("ChatCompletion", attrs)


def test_a_failed_result_becomes_the_calls_error() -> None:
    (rec,), _ = normalize_request(
        make_request(_llm_span(("c1", "ok"), ("c2", FAILED)), scope=SCOPE)
    )
    assert rec.kind is RecordKind.MODEL
    assert rec.attributes[TOOL_RESPONSES_ATTR] == {
        "c1": "ok",
        "c2": {"error": "Error executing tool 'book': sold out"},
    }
    assert "camel" in rec.attributes[ADAPTERS_ATTR]


def test_other_results_are_left_alone() -> None:
    (rec,), _ = normalize_request(
        make_request(_llm_span(("c1", "Tool execution went fine")), scope=SCOPE)
    )
    assert rec.attributes[TOOL_RESPONSES_ATTR] == {"c1": "Tool execution went fine"}
    assert "camel" not in rec.attributes.get(ADAPTERS_ATTR, [])
