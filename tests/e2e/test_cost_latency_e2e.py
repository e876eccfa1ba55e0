"""Tokens, cost and latency end to end: a real `tracepass serve`, the corpus's OTLP of
three frameworks that record token usage (pydantic-ai native, Strands native, LangChain
via OpenInference) posted over real OTLP/HTTP, and the figures checked in the
conversation API, the list filters and /metrics against sums computed here from the raw
files (docs/cost-latency.md).

The corpus's scripted model (`scripted-travel-model`) is in no price list: the config
prices it (`pricing.models`), the case an operator has for a self-hosted model."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from _live_support import FAST_CONFIG, http_get, scrape, select, serve, total, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]

CORPUS = Path(__file__).resolve().parents[1] / "frameworks" / "corpus"
MODEL = "scripted-travel-model"
INPUT_RATE, OUTPUT_RATE = 2.0, 8.0  # USD per million tokens
# corpus scenario → which spans are its model calls, read here from the raw attributes.
FRAMEWORKS = {
    "pydantic_ai_native": ("gen_ai.operation.name", "chat"),
    "strands_native": ("gen_ai.operation.name", "chat"),
    "heldout_langchain_loop_openinference": ("openinference.span.kind", "LLM"),
}
INPUT_NAMES = ("gen_ai.usage.input_tokens", "llm.token_count.prompt")
OUTPUT_NAMES = ("gen_ai.usage.output_tokens", "llm.token_count.completion")


def _value(v: dict[str, Any]) -> Any:
    if "intValue" in v:
        return int(v["intValue"])
    return v.get("stringValue")


def _request(name: str) -> dict[str, Any]:
    """The scenario's OTLP JSON, its conversation renamed after it and its agent version
    set to its name (so each framework is its own conversation and series)."""
    text = (CORPUS / f"{name}.otlp.jsonl").read_text().replace("conv-travel-1", f"conv-{name}")
    doc: dict[str, Any] = json.loads(text.splitlines()[0])
    for rs in doc["resourceSpans"]:
        rs.setdefault("resource", {}).setdefault("attributes", []).append(
            {"key": "service.version", "value": {"stringValue": name}}
        )
    return doc


def _expected(doc: dict[str, Any], marker: tuple[str, str]) -> dict[str, Any]:
    """Model calls, tokens, cost and wall time computed from the raw spans."""
    calls = inputs = outputs = 0
    starts: list[int] = []
    ends: list[int] = []
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                starts.append(int(span["startTimeUnixNano"]))
                ends.append(int(span["endTimeUnixNano"]))
                attrs = {kv["key"]: _value(kv["value"]) for kv in span.get("attributes", [])}
                if attrs.get(marker[0]) != marker[1]:
                    continue
                calls += 1
                inputs += next(attrs[k] for k in INPUT_NAMES if k in attrs)
                outputs += next(attrs[k] for k in OUTPUT_NAMES if k in attrs)
    return {
        "model_calls": calls,
        "input_tokens": inputs,
        "output_tokens": outputs,
        "cost_usd": (inputs * INPUT_RATE + outputs * OUTPUT_RATE) / 1e6,
        "duration_s": (max(ends) - min(starts)) / 1e9,
    }


def _post(url: str, doc: dict[str, Any]) -> None:
    req = urllib.request.Request(
        url, data=json.dumps(doc).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        assert resp.status == 200


def test_corpus_usage_reaches_the_api_and_metrics(tmp_path: Path) -> None:
    config = {
        **FAST_CONFIG,
        "pricing": {
            "models": {MODEL: {"input_per_mtok": INPUT_RATE, "output_per_mtok": OUTPUT_RATE}}
        },
    }
    docs = {name: _request(name) for name in FRAMEWORKS}
    expected = {name: _expected(docs[name], marker) for name, marker in FRAMEWORKS.items()}
    with serve(tmp_path, config=config) as s:
        for doc in docs.values():
            _post(f"{s.http}/v1/traces", doc)

        def evaluated() -> list[tuple[str, dict[str, str], float]] | None:
            samples = scrape(s.metrics_url)
            done = total(samples, "tracepass_conversations_total")
            return samples if done >= len(FRAMEWORKS) else None

        samples = wait_until(evaluated, 120, "three evaluated conversations")

        for name, want in expected.items():
            status, body = http_get(f"{s.http}/api/v1/conversations/conv-{name}")
            assert status == 200, body
            view = json.loads(body)
            usage = view["usage"]
            assert usage["model_calls"] == want["model_calls"], name
            assert usage["input_tokens"] == want["input_tokens"], name
            assert usage["output_tokens"] == want["output_tokens"], name
            # Not carried by these spans: null, not 0.
            assert usage["reasoning_tokens"] is None, name
            assert usage["cost_usd"] == pytest.approx(want["cost_usd"], rel=1e-9), name
            assert view["duration_s"] == pytest.approx(want["duration_s"], abs=1e-6), name
            turns = view["turns"]
            assert sum(t["usage"]["model_calls"] for t in turns) == want["model_calls"]
            assert sum(t["usage"]["cost_usd"] for t in turns) == pytest.approx(want["cost_usd"])
            models = [sp for t in turns for sp in t["spans"] if sp["kind"] == "model"]
            assert len(models) == want["model_calls"]
            assert all(sp["model"] == MODEL and sp["cost_usd"] > 0 for sp in models)

            version = {"agent_version": name}
            tokens = {
                t: total(samples, "tracepass_tokens_total", type=t, **version)
                for t in ("input", "output")
            }
            assert tokens == {"input": want["input_tokens"], "output": want["output_tokens"]}
            assert total(samples, "tracepass_model_calls_total", **version) == want["model_calls"]
            assert total(
                samples, "tracepass_conversation_cost_usd_sum", **version
            ) == pytest.approx(want["cost_usd"], rel=1e-9)
            assert total(samples, "tracepass_conversation_cost_usd_count", **version) == 1
            assert total(
                samples, "tracepass_conversation_duration_seconds_sum", **version
            ) == pytest.approx(want["duration_s"], abs=1e-6)
            assert not select(samples, "tracepass_model_calls_unpriced_total", **version)

        # The list filters: indexed columns of the stored results.
        dearest = max(expected, key=lambda n: expected[n]["cost_usd"])
        floor = expected[dearest]["cost_usd"] * 0.999
        status, body = http_get(f"{s.http}/api/v1/conversations?min_cost_usd={floor}")
        assert status == 200, body
        listed = json.loads(body)["conversations"]
        assert [c["conversation_id"] for c in listed] == [f"conv-{dearest}"]
        assert listed[0]["cost_usd"] == pytest.approx(expected[dearest]["cost_usd"])
        status, body = http_get(f"{s.http}/api/v1/conversations?min_duration_s=0")
        assert len(json.loads(body)["conversations"]) == len(FRAMEWORKS)
        assert http_get(f"{s.http}/api/v1/conversations?min_cost_usd=-1")[0] == 400
        assert s.terminate() == 0, s.stderr()


def test_unknown_model_and_bad_counts_are_missing_with_a_reason(tmp_path: Path) -> None:
    """No price for the model, and one negative token count: the API says null with the
    reason, /metrics counts the unpriced calls and the unreadable count; nothing crashes
    and no cost is observed."""
    doc = _request("pydantic_ai_native")
    spans = [sp for rs in doc["resourceSpans"] for ss in rs["scopeSpans"] for sp in ss["spans"]]
    chat = next(sp for sp in spans if sp["name"].startswith("chat"))
    for kv in chat["attributes"]:
        if kv["key"] == "gen_ai.usage.input_tokens":
            kv["value"] = {"intValue": "-5"}
    with serve(tmp_path, config=FAST_CONFIG) as s:
        _post(f"{s.http}/v1/traces", doc)
        samples = wait_until(
            lambda: (
                got
                if total(got := scrape(s.metrics_url), "tracepass_conversations_total") >= 1
                else None
            ),
            120,
            "an evaluated conversation",
        )
        status, body = http_get(f"{s.http}/api/v1/conversations/conv-pydantic_ai_native")
        assert status == 200, body
        usage = json.loads(body)["usage"]
        assert usage["cost_usd"] is None
        assert usage["input_tokens"] is None
        assert "negative (-5)" in usage["missing"]["input_tokens"]
        assert "cost_usd" in usage["missing"]
        assert usage["output_tokens"] is not None
        assert total(samples, "tracepass_fields_unreadable_total", field="token_count") == 1
        unpriced = {
            r[1]["reason"]: r[2] for r in select(samples, "tracepass_model_calls_unpriced_total")
        }
        assert unpriced == {"invalid_usage": 1, "unknown_model": 5}
        assert total(samples, "tracepass_conversation_cost_usd_count") == 0
        assert s.terminate() == 0, s.stderr()
