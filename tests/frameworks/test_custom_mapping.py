"""A corpus stack read right from a user's `conventions.custom` mapping alone.

The Vercel AI SDK scenario is read with its built-in convention (`vercel_ai`) deleted
from the dispatch table: first shown to come out wrong without a mapping (so the
deletion is real), then rebuilt turn by turn, exactly as `test_corpus.py` compares it,
from the mapping in `MAPPING` (written in a real config file, loaded by `load_config`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_corpus import CORPUS, compare

from tracepass.collector.app.cli.sources import requests_from_otlp
from tracepass.collector.config import load_config
from tracepass.collector.normalize import spans, table, vercel_ai
from tracepass.collector.pipeline import assemble_offline
from tracepass.collector.pipeline.offline import default_normalizer

SCENARIO = "vercel_ai_v6_telemetry"

MAPPING = """\
conventions:
  custom:
    - name: ai-turn
      match: {scope: "ai", span_name: "ai.generateText"}
      kind: turn
      fields:
        conversation_id: ai.telemetry.metadata.conversationId
        agent_name: ai.telemetry.functionId
        query: "ai.prompt#/messages/-1/content"
        answer: ai.response.text
        model: ai.model.id
        input_tokens: ai.usage.inputTokens
        output_tokens: ai.usage.outputTokens
    - name: ai-tool
      match: {scope: "ai", span_name_regex: "^ai\\\\.toolCall$", attributes: [ai.toolCall.name]}
      kind: tool
      fields:
        conversation_id: ai.telemetry.metadata.conversationId
        tool_name: ai.toolCall.name
        call_id: ai.toolCall.id
        arguments: ai.toolCall.args
        result: ai.toolCall.result
        error: event:exception/exception.message
    - name: ai-model
      match: {scope: "ai", span_name: "ai.*.doGenerate"}
      kind: model
      fields:
        conversation_id: ai.telemetry.metadata.conversationId
        answer: ai.response.text
        model: [ai.response.model, ai.model.id]
"""


@pytest.fixture
def without_vercel_convention(monkeypatch: pytest.MonkeyPatch) -> None:
    """The built-in table with the Vercel AI SDK convention and adapter deleted."""
    kept = [c for c in table.CONVENTIONS if c.name != vercel_ai.NAME]
    monkeypatch.setattr(spans, "BY_KEY", tuple((k, c) for c in kept for k in c.keys))
    monkeypatch.setattr(spans, "BY_SPAN_NAME", {n: c for c in kept for n in c.span_names})
    monkeypatch.setattr(
        table, "ADAPTERS", tuple(a for a in table.ADAPTERS if a.name != vercel_ai.NAME)
    )
    monkeypatch.setattr(table, "_SCOPE_CACHE", {})


def _expected() -> dict[str, Any]:
    return json.loads((CORPUS / f"{SCENARIO}.expected.json").read_text(encoding="utf-8"))


def _read(config_path: Path | None) -> list[str]:
    conventions = load_config(config_path).conventions if config_path else None
    files = [CORPUS / f"{SCENARIO}.otlp.jsonl"]
    convs = assemble_offline(
        requests_from_otlp(files), normalizer=default_normalizer(custom=conventions)
    )
    return compare(convs, _expected())


@pytest.mark.usefixtures("without_vercel_convention")
def test_without_the_convention_the_stack_is_misread() -> None:
    assert _read(None), "the deleted convention still reads the scenario"


@pytest.mark.usefixtures("without_vercel_convention")
def test_a_mapping_alone_reads_the_stack_turn_by_turn(tmp_path: Path) -> None:
    config = tmp_path / "collector.yaml"
    config.write_text(MAPPING, encoding="utf-8")
    assert _read(config) == []
