"""A cost the span carries, end to end (issue 34 item 7, docs/cost-latency.md): model
calls from the real OTel SDK, exported over real OTLP/HTTP to a real `tracepass serve`.
The span's own figure (the proposed GenAI `gen_ai.usage.cost.amount`, OpenInference's
`llm.cost.total`, LiteLLM's `hidden_params.response_cost`) wins over local prices and is
marked `cost_source: "span"`; a call without one is priced locally; a cost in another
currency is not read as USD; cache-write input tokens are summed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _live_support import FAST_CONFIG, http_get, serve, wait_until
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

MODEL = "scripted-travel-model"
INPUT_RATE, OUTPUT_RATE = 2.0, 8.0  # USD per million tokens


def _messages(role: str, text: str) -> str:
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": text}]}])


def _send(endpoint: str, conversation: str, calls: list[dict[str, Any]]) -> None:
    """One turn of `conversation` whose model calls carry `calls`' attributes."""
    provider = TracerProvider(resource=Resource.create({"service.name": "cost-agent"}))
    provider.add_span_processor(
        SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces", timeout=10))
    )
    tracer = provider.get_tracer("tests.span_cost")
    with tracer.start_as_current_span(
        "invoke_agent cost-agent",
        attributes={
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.conversation.id": conversation,
            "gen_ai.agent.name": "cost-agent",
            "gen_ai.input.messages": _messages("user", "how much?"),
            "gen_ai.output.messages": _messages("assistant", "this much"),
        },
    ):
        for attrs in calls:
            with tracer.start_as_current_span(
                f"chat {attrs['gen_ai.request.model']}",
                attributes={"gen_ai.operation.name": "chat", **attrs},
            ):
                pass
    provider.shutdown()


def _detail(http: str, conversation: str) -> dict[str, Any] | None:
    status, body = http_get(f"{http}/api/v1/conversations/{conversation}")
    return json.loads(body) if status == 200 else None


def test_span_cost_wins_over_prices_and_is_marked(tmp_path: Path) -> None:
    config = {
        **FAST_CONFIG,
        "pricing": {
            "models": {MODEL: {"input_per_mtok": INPUT_RATE, "output_per_mtok": OUTPUT_RATE}}
        },
    }
    tokens = {"gen_ai.usage.input_tokens": 1000, "gen_ai.usage.output_tokens": 100}
    local = (1000 * INPUT_RATE + 100 * OUTPUT_RATE) / 1e6
    with serve(tmp_path, config=config) as s:
        _send(
            s.http,
            "conv-span-cost",
            [
                # Priced locally too, but the gateway's figure wins.
                {"gen_ai.request.model": MODEL, **tokens, "gen_ai.usage.cost.amount": 0.5,
                 "gen_ai.usage.cost.currency": "USD"},
                # A model no local price knows: the span's figure is the only one.
                {"gen_ai.request.model": "gateway-only", **tokens, "llm.cost.total": 0.25},
                {"gen_ai.request.model": "litellm-only", **tokens,
                 "hidden_params": json.dumps({"response_cost": 0.125, "model_id": None})},
                # No figure: local prices, and cache-write tokens are read.
                {"gen_ai.request.model": MODEL, **tokens,
                 "gen_ai.usage.cache_creation.input_tokens": 40},
            ],
        )  # fmt: skip
        _send(
            s.http,
            "conv-euro",
            [{"gen_ai.request.model": "gateway-only", **tokens,
              "gen_ai.usage.cost.amount": 0.5, "gen_ai.usage.cost.currency": "EUR"}],
        )  # fmt: skip
        conv = wait_until(lambda: _detail(s.http, "conv-span-cost"), 120, "the conversation")
        euro = wait_until(lambda: _detail(s.http, "conv-euro"), 120, "the euro conversation")
        assert s.terminate() == 0, s.stderr()

    spans = [sp for turn in conv["turns"] for sp in turn["spans"] if sp["kind"] == "model"]
    assert [(sp["cost_usd"], sp["cost_source"]) for sp in spans] == [
        (0.5, "span"),
        (0.25, "span"),
        (0.125, "span"),
        (pytest.approx(local), "prices"),
    ]
    assert spans[3]["cache_write_input_tokens"] == 40
    usage = conv["usage"]
    assert usage["cost_usd"] == pytest.approx(0.5 + 0.25 + 0.125 + local)
    assert usage["cost_source"] == "mixed"
    assert usage["cache_write_input_tokens"] == 40
    assert usage["model_calls"] == 4

    (call,) = [sp for turn in euro["turns"] for sp in turn["spans"] if sp["kind"] == "model"]
    assert call["cost_usd"] is None
    assert call["cost_source"] is None
    assert "EUR" in call["missing"]["span_cost_usd"]
    assert euro["usage"]["cost_usd"] is None
