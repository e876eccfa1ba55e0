"""OpenAI Agents SDK for JavaScript/TypeScript corpus: the shared travel scenario under
OpenInference's OpenAI Agents processor, with one agent and with a hand-off.

    python generate.py --list
    python generate.py openai_agents_js_openinference [openai_agents_js_openinference_handoff]

`scenario.mjs` runs the travel agent (`@openai/agents` `Agent` with the three tools as
`tool({parameters: zod, execute, errorFunction})`) once per turn with the previous run's
`history`, under `context.with(setSession(…, {sessionId}))` (OpenInference's session id).
The model is the SDK's own `OpenAIResponsesModel` on a real `openai` client whose
`fetch` answers POST /v1/responses with the script's next step (only the LLM is fake).
The hand-off variant gives the triage agent `get_weather` and `handoffs: [booking-agent]`
(`search_flights`, `book_flight`); turn 2 starts with its `transfer_to_booking_agent`
call. Spans go over OTLP/HTTP JSON to a loopback receiver (`node_support.py`).
Packages: `package-lock.json` (`npm ci`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import generator_support as support
import harness
import node_support

HERE = Path(__file__).resolve().parent
BOOKING_AGENT = "booking-agent"
BOOKING_TOOLS = ("search_flights", "book_flight")
NOTES = [
    "model: OpenAIResponsesModel on an openai client whose fetch answers POST /v1/responses "
    "with the script's steps as Responses API JSON (no network)",
    "session: context.with(setSession(context.active(), {sessionId: CONVERSATION_ID}), run) "
    "(@arizeai/openinference-core); run(..., {groupId: CONVERSATION_ID})",
    "tools return JSON text for non-string results (the SDK hands the model strings); the "
    "truth keeps the plain results",
]


def handoff_truth(document: dict[str, Any]) -> dict[str, Any]:
    """Each call's agent and each turn's steps (turn 2: triage, then the hand-off)."""
    for conversation in document["conversations"]:
        for turn in conversation["turns"]:
            booking = any(c["name"] in BOOKING_TOOLS for c in turn["tool_calls"])
            for call in turn["tool_calls"]:
                call["agent"] = (
                    BOOKING_AGENT if call["name"] in BOOKING_TOOLS else harness.AGENT_NAME
                )
            turn["steps"] = (
                [
                    {"agent": harness.AGENT_NAME, "kind": "agent"},
                    {"agent": BOOKING_AGENT, "kind": "handoff"},
                ]
                if booking
                else []
            )
    return document


def generate(scenario: str) -> Path:
    handoff = scenario.endswith("_handoff")
    path = node_support.generate_corpus(
        HERE,
        scenario,
        framework="@openai/agents (OpenAI Agents SDK, JS)",
        framework_package="@openai/agents",
        instrumentation="@arizeai/openinference-instrumentation-openai-agents",
        instrumentation_package="@arizeai/openinference-instrumentation-openai-agents",
        settings={"processor": "OpenAIAgentsInstrumentation({tracerProvider}).manuallyInstrument"},
        notes=NOTES
        + (["two agents: travel-agent hands turn 2 to booking-agent"] if handoff else []),
    )
    if handoff:
        expected = path.with_name(f"{scenario}.expected.json")
        truth = handoff_truth(json.loads(expected.read_text()))
        expected.write_text(json.dumps(truth, indent=2) + "\n")
    return path


SCENARIOS = {
    "openai_agents_js_openinference": generate,
    "openai_agents_js_openinference_handoff": generate,
}

if __name__ == "__main__":
    raise SystemExit(support.run_cli(SCENARIOS, __doc__))
