"""Vercel AI SDK (previous major, ai@6) corpus: the shared travel scenario, `experimental_telemetry`.

    python generate.py --list
    python generate.py vercel_ai_v6_telemetry

`scenario.mjs` runs `generateText` (a multi-step tool loop, `stopWhen: stepCountIs(10)`)
once per turn with the conversation's history, the model scripted with the SDK's own
`MockLanguageModelV3` from `ai/test`, the three tools as `tool({inputSchema: zod, execute})`
(the failing `book_flight` throws: the SDK turns that into a `tool-error` the model sees).
Telemetry is the SDK's built-in OpenTelemetry tracing switched on per call
(`experimental_telemetry: {isEnabled: true, functionId, metadata}`) on a
`NodeTracerProvider` exporting OTLP/HTTP JSON to a loopback receiver (`node_support.py`).
Packages: `package-lock.json` (`npm ci`).
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
    "model: MockLanguageModelV3 from ai/test replaying the script's steps (tool-call "
    "content with the script's call ids; JSON-text inputs)",
    "one generateText call per turn with the previous turns' response.messages as history",
    "conversation id: experimental_telemetry.metadata {conversationId} "
    "(span attribute ai.telemetry.metadata.conversationId)",
    "agent name: experimental_telemetry.functionId = 'travel-agent'",
]


def generate(scenario: str) -> Path:
    settings = {
        "experimental_telemetry": "{isEnabled: true, functionId: 'travel-agent', "
        "metadata: {conversationId}}"
    }
    return node_support.generate_corpus(
        HERE,
        scenario,
        framework=FRAMEWORK,
        framework_package="ai",
        instrumentation="built in (experimental_telemetry)",
        instrumentation_package="ai",
        settings=settings,
        notes=NOTES,
    )


SCENARIOS = {"vercel_ai_v6_telemetry": generate}

if __name__ == "__main__":
    raise SystemExit(support.run_cli(SCENARIOS, __doc__))
