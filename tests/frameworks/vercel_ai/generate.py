"""Vercel AI SDK (current major) corpus: the shared travel scenario through `@ai-sdk/otel`.

    python generate.py --list
    python generate.py vercel_ai_otel [vercel_ai_otel_legacy]

`scenario.mjs` runs `generateText` (a multi-step tool loop, `stopWhen: stepCountIs(10)`)
once per turn with the conversation's history, the model scripted with the SDK's own
`MockLanguageModelV4` from `ai/test`, the three tools as `tool({inputSchema: zod, execute})`
(the failing `book_flight` throws: the SDK turns that into a `tool-error` the model sees).
Telemetry is the SDK's OpenTelemetry integration registered with `registerTelemetry`,
either `OpenTelemetry` (GenAI semconv attributes; ai@7's default) or `LegacyOpenTelemetry`
(the `ai.*` spans of ai@6), on a `NodeTracerProvider` exporting OTLP/HTTP JSON to a
loopback receiver (`node_support.py`). Packages: `package-lock.json` (`npm ci`).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import generator_support as support
import node_support

HERE = Path(__file__).resolve().parent

FRAMEWORK = "ai (Vercel AI SDK)"
NOTES = [
    "model: MockLanguageModelV4 from ai/test replaying the script's steps (tool-call "
    "content with the script's call ids; JSON-text inputs)",
    "one generateText call per turn with the previous turns' response.messages as history",
    "conversation id: runtimeContext {conversationId} with telemetry.includeRuntimeContext "
    "{conversationId: true} (span attribute ai.settings.context.conversationId)",
    "agent name: telemetry.functionId = 'travel-agent'",
]


def generate(scenario: str) -> Path:
    legacy = scenario.endswith("_legacy")
    settings = {
        "registerTelemetry": "LegacyOpenTelemetry()"
        if legacy
        else "OpenTelemetry({agentSpanName: 'functionId', runtimeContext: true})",
    }
    return node_support.generate_corpus(
        HERE,
        scenario,
        framework=FRAMEWORK,
        framework_package="ai",
        instrumentation="@ai-sdk/otel" + (" (legacy)" if legacy else ""),
        instrumentation_package="@ai-sdk/otel",
        settings=settings,
        notes=NOTES,
    )


SCENARIOS = {"vercel_ai_otel": generate, "vercel_ai_otel_legacy": generate}

if __name__ == "__main__":
    raise SystemExit(support.run_cli(SCENARIOS, __doc__))
