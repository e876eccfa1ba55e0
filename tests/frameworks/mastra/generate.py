"""Mastra corpus: the shared travel scenario through Mastra's own tracing and its
`OtelExporter` (`@mastra/observability` + `@mastra/otel-exporter`).

    python generate.py --list
    python generate.py mastra_otel

`scenario.mjs` builds a Mastra `Agent` (the three tools as `createTool({inputSchema: zod,
execute})`; the failing `book_flight` throws, which Mastra hands the model as a tool
error) with `Memory` on the in-memory store, registers it on a `Mastra` instance whose
`observability` is `new Observability({configs: {otel: {serviceName, exporters: [new
OtelExporter({provider: {custom: {endpoint, protocol: 'http/json'}}, signals: {logs:
false}})]}}})`, and runs `agent.generate(query, {memory: {thread: CONVERSATION_ID,
resource}})` once per turn (the memory thread carries the history and is the
conversation id). The model is the AI SDK's own `MockLanguageModelV3` from `ai/test`,
replaying the script's steps. The exporter posts OTLP/HTTP JSON to the loopback receiver
of `node_support.py`. Packages: `package-lock.json` (`npm ci`).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import generator_support as support
import node_support

HERE = Path(__file__).resolve().parent

NOTES = [
    "model: MockLanguageModelV3 from ai/test replaying the script's steps (doGenerate and "
    "doStream: Mastra's agent loop streams); tool-call content with the script's call ids",
    "conversation id: the memory thread (agent.generate(..., {memory: {thread, resource}})), "
    "which Mastra's tracing records as gen_ai.conversation.id",
    "agent name: Agent({id: 'travel-agent', name: 'travel-agent'})",
]


def generate(scenario: str) -> Path:
    return node_support.generate_corpus(
        HERE,
        scenario,
        framework="@mastra/core (Mastra)",
        framework_package="@mastra/core",
        instrumentation="@mastra/otel-exporter",
        instrumentation_package="@mastra/otel-exporter",
        settings={
            "observability": "new Observability({configs: {otel: {serviceName, exporters: "
            "[new OtelExporter({provider: {custom: {endpoint, protocol: 'http/json'}}, "
            "signals: {logs: false}})]}}})",
            "observability_version": node_support.package_version(HERE, "@mastra/observability"),
        },
        notes=NOTES,
    )


SCENARIOS = {"mastra_otel": generate}

if __name__ == "__main__":
    raise SystemExit(support.run_cli(SCENARIOS, __doc__))
