"""Token usage read from model-call spans: every convention's names, bad values kept out
with their reason, and only MODEL records read (agent spans repeat their calls' sums)."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracepass.collector.normalize import ReadTally, RecordKind, normalize_request
from tracepass.collector.normalize.usage import read_usage, timing_problem
from tracepass.collector.records import ModelUsage, SpanRecord
from tracepass.collector.state import decode_record, encode_record


@pytest.mark.parametrize(
    ("attrs", "expected"),
    [
        # OTel GenAI (current)
        (
            {
                "gen_ai.usage.input_tokens": 100,
                "gen_ai.usage.output_tokens": 20,
                "gen_ai.usage.cache_read.input_tokens": 64,
                "gen_ai.usage.reasoning.output_tokens": 8,
                "gen_ai.provider.name": "openai",
            },
            ModelUsage(100, 20, 64, 8, "openai"),
        ),
        # GenAI <= 1.26 / OpenLLMetry
        (
            {
                "gen_ai.usage.prompt_tokens": 100,
                "gen_ai.usage.completion_tokens": 20,
                "gen_ai.usage.cache_read_input_tokens": 10,
                "gen_ai.usage.reasoning_tokens": 5,
                "gen_ai.system": "anthropic",
            },
            ModelUsage(100, 20, 10, 5, "anthropic"),
        ),
        # OpenInference
        (
            {
                "llm.token_count.prompt": 7,
                "llm.token_count.completion": 3,
                "llm.token_count.prompt_details.cache_read": 2,
                "llm.token_count.completion_details.reasoning": 1,
                "llm.provider": "google",
            },
            ModelUsage(7, 3, 2, 1, "google"),
        ),
        # llm.usage.* and text counts
        (
            {"llm.usage.prompt_tokens": "12", "llm.usage.completion_tokens": 4.0},
            ModelUsage(12, 4, None, None, None),
        ),
        # provider only: no counts
        ({"gen_ai.provider.name": "openai"}, ModelUsage(provider="openai")),
        ({}, None),
    ],
)
def test_each_convention_names(attrs: dict[str, Any], expected: ModelUsage | None) -> None:
    assert read_usage(attrs) == expected


@pytest.mark.parametrize(
    ("value", "note"),
    [
        (-3, "negative (-3)"),
        ("lots", "not a number ('lots')"),
        (2.5, "fractional (2.5)"),
        (True, "not a number (bool)"),
        (float("nan"), "not a number"),
        (10**13, "implausible"),
    ],
)
def test_bad_counts_are_left_out_with_the_reason(value: Any, note: str) -> None:
    usage = read_usage({"gen_ai.usage.input_tokens": value, "gen_ai.usage.output_tokens": 5})
    assert usage is not None
    assert usage.input_tokens is None
    assert usage.output_tokens == 5
    assert usage.problem is not None
    assert usage.problem.startswith("input_tokens: ")
    assert note in usage.problem


def test_timing_problems() -> None:
    assert timing_problem(10, 20) is None
    assert timing_problem(20, 10) == "ends before it starts"
    assert timing_problem(0, 10) == "start or end time missing"
    assert timing_problem(1, 1 + 400 * 86_400 * 10**9) == "longer than a year"


def _request(spans: list[tuple[str, dict[str, Any], int, int]]) -> ExportTraceServiceRequest:
    req = ExportTraceServiceRequest()
    out = req.resource_spans.add().scope_spans.add().spans
    for n, (name, attrs, start, end) in enumerate(spans, start=1):
        span = out.add()
        span.trace_id = (1).to_bytes(16, "big")
        span.span_id = n.to_bytes(8, "big")
        if n > 1:
            span.parent_span_id = (1).to_bytes(8, "big")
        span.name = name
        span.start_time_unix_nano = start
        span.end_time_unix_nano = end
        for key, value in attrs.items():
            v = span.attributes.add(key=key).value
            if isinstance(value, bool):
                v.bool_value = value
            elif isinstance(value, int):
                v.int_value = value
            else:
                v.string_value = str(value)
    return req


def test_only_model_records_carry_usage_and_bad_input_is_tallied() -> None:
    agent = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.usage.input_tokens": 999,  # the agent's sum: not a model call
        "gen_ai.usage.output_tokens": 999,
    }
    chat = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.usage.input_tokens": -1,
        "gen_ai.usage.output_tokens": 7,
    }
    tally = ReadTally()
    records, _ = normalize_request(
        _request([("invoke_agent a", agent, 10, 100), ("chat gpt-4o", chat, 50, 20)]),
        tally=tally,
    )
    by_kind = {r.kind: r for r in records}
    assert by_kind[RecordKind.TURN].usage is None
    model = by_kind[RecordKind.MODEL]
    assert model.usage is not None
    assert (model.usage.input_tokens, model.usage.output_tokens) == (None, 7)
    assert tally.unreadable == {"token_count": 1, "span_time": 1}


def test_usage_survives_the_state_codec() -> None:
    rec = SpanRecord(
        trace_id="a" * 32,
        span_id="b" * 16,
        parent_span_id=None,
        kind=RecordKind.MODEL,
        name="chat",
        start_ns=1,
        end_ns=2,
        usage=ModelUsage(1, 2, 3, None, "openai", "reasoning_tokens: negative (-1)"),
    )
    assert decode_record(encode_record(rec)) == rec
    old = encode_record(rec).rsplit(",[", 1)[0] + "]"  # a row written before usage
    assert decode_record(old).usage is None
