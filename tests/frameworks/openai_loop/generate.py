"""Held-out corpus: a hand-rolled tool-calling loop on the `openai` SDK.

Run inside the openai_loop environment (see requirements.txt):
`python generate.py heldout_openai_otel_contrib` (or another name of `--list`).

Held out: tracepass has no adapter for any of these stacks; they test the conventions
alone (issue 10: "held-out traces from frameworks and settings not named here are
recovered wherever their spans carry the data").

No agent framework: the application calls `client.chat.completions.create(...)` with
the three harness tools as OpenAI function tools, runs each requested call itself
(`harness.TOOLS`), appends a `tool` message per call and asks again until the model
answers in text; both turns share one message history. This is the loop most
applications write by hand. Only the model is fake: the real `OpenAI` client talks to an
in-process `httpx.MockTransport` replaying `harness.model_steps()` as chat-completions
responses (two tool calls in turn 1's first step).

What the application adds itself, as such a loop does: one span per turn,
`travel-agent turn`, with no GenAI attributes (so nothing marks it as the agent), because
otherwise each model call is its own trace. The tools are not traced (the
instrumentations trace the client only), so tool calls are visible only as the model's
requests and the `tool` messages of the next request. A tool error goes to the model as
`{"error": message}` JSON text; other results as JSON text (plain text for strings).

Scenarios (one instrumentation per process):

* `heldout_openai_otel_contrib` — `opentelemetry-instrumentation-openai-v2` on its
  default (v1.30) conventions with content capture on: messages are GenAI events sent as
  OTLP log records (`gen_ai.user.message`, `gen_ai.tool.message`, `gen_ai.choice`, …).
  The application's turn span carries `session.id`, the only place a session id can be.
* `heldout_openai_otel_contrib_latest` — the same with
  `OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental` and content `span_only`:
  `gen_ai.input.messages` / `gen_ai.output.messages` on the chat spans.
* `heldout_openai_openinference` — `openinference-instrumentation-openai`, session from
  `using_session(CONVERSATION_ID)`.
* `heldout_openai_openllmetry` — OpenLLMetry's `opentelemetry-instrumentation-openai`
  (`TRACELOOP_TRACE_CONTENT=true`, its default attribute mode: flattened
  `gen_ai.prompt.N.*` / `gen_ai.completion.N.*`). Without the Traceloop SDK there are no
  association properties, so the session id is on the application's turn span, as for
  the OTel contrib scenarios.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import generator_support as support
import harness

SCENARIOS = (
    "heldout_openai_otel_contrib",
    "heldout_openai_otel_contrib_latest",
    "heldout_openai_openinference",
    "heldout_openai_openllmetry",
)
TURN_SPAN = f"{harness.AGENT_NAME} turn"

TOOL_SPECS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": harness.get_weather.__doc__,
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "search_flights",
            "description": harness.search_flights.__doc__,
            "parameters": {
                "type": "object",
                "properties": {
                    "origin": {"type": "string"},
                    "destination": {"type": "string"},
                    "filters": {
                        "type": "object",
                        "properties": {
                            "max_price": {"type": "integer"},
                            "cabin": {"type": "string"},
                        },
                    },
                },
                "required": ["origin", "destination", "filters"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "book_flight",
            "description": harness.book_flight.__doc__,
            "parameters": {
                "type": "object",
                "properties": {"flight_id": {"type": "string"}},
                "required": ["flight_id"],
            },
        },
    },
]


def scripted_client() -> Any:
    import httpx
    from openai import OpenAI

    return OpenAI(
        api_key="scripted",
        base_url="http://scripted-model.invalid/v1",
        http_client=httpx.Client(transport=support.chat_completions_transport(support.MODEL_NAME)),
    )


def tool_message(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    """Run one requested call and say what happened, as the loop tells the model."""
    try:
        result = harness.TOOLS[name](**json.loads(arguments))
    except harness.ToolFailure as exc:
        content = json.dumps({"error": str(exc)})
    else:
        content = result if isinstance(result, str) else json.dumps(result)
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def run_turns(client: Any, turn_attributes: dict[str, str]) -> list[str | None]:
    """The hand-rolled agent loop, one span per turn; returns the answers."""
    from opentelemetry import trace

    tracer = trace.get_tracer("travel-agent-app")
    messages: list[dict[str, Any]] = [{"role": "system", "content": harness.SYSTEM_PROMPT}]
    answers: list[str | None] = []
    for turn in harness.TURNS:
        with tracer.start_as_current_span(TURN_SPAN, attributes=turn_attributes):
            messages.append({"role": "user", "content": turn.query})
            while True:
                reply = (
                    client.chat.completions.create(
                        model=support.MODEL_NAME, messages=messages, tools=TOOL_SPECS
                    )
                    .choices[0]
                    .message
                )
                messages.append(reply.model_dump(exclude_none=True))
                if not reply.tool_calls:
                    answers.append(reply.content)
                    break
                for call in reply.tool_calls:
                    messages.append(
                        tool_message(call.id, call.function.name, call.function.arguments)
                    )
    return answers


COMMON_NOTES = [
    "No framework: a hand-rolled chat-completions tool loop on the openai SDK; the real "
    f"OpenAI client talks to an in-process httpx.MockTransport (model {support.MODEL_NAME!r}).",
    f"The application wraps each turn in a plain span {TURN_SPAN!r} (no GenAI attributes); "
    "tools are not traced, so calls are seen only as the model's requests and the next "
    "request's tool messages.",
    'Tool errors go to the model as {"error": message} JSON; results as JSON text '
    "(strings as they are). The truth keeps the plain results.",
]


def generate(scenario: str) -> Path:
    settings = harness.content_capture_env()
    turn_attributes: dict[str, str] = {}
    conversation: dict[str, Any] = {}
    notes = list(COMMON_NOTES)
    if scenario.startswith("heldout_openai_otel_contrib"):
        if scenario.endswith("_latest"):
            latest = {
                "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
                "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "span_only",
            }
            os.environ.update(latest)
            settings.update(latest)
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

        install = support.installer(OpenAIInstrumentor, logs=True)
        turn_attributes = {"session.id": harness.CONVERSATION_ID}
        settings["turn span attribute session.id"] = harness.CONVERSATION_ID
        notes.append(
            "The instrumentation has no session notion: the session id is on the "
            "application's turn span only."
        )
        instrumentation = "opentelemetry-instrumentation-openai-v2"
    elif scenario == "heldout_openai_openllmetry":
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor as OLInstrumentor

        install = support.installer(OLInstrumentor)
        turn_attributes = {"session.id": harness.CONVERSATION_ID}
        settings["turn span attribute session.id"] = harness.CONVERSATION_ID
        notes.append(
            "Without the Traceloop SDK there are no association properties: the session "
            "id is on the application's turn span only."
        )
        instrumentation = "opentelemetry-instrumentation-openai"
    else:
        from openinference.instrumentation import using_session
        from openinference.instrumentation.openai import OpenAIInstrumentor as OIInstrumentor

        install = support.installer(OIInstrumentor)
        settings["using_session"] = harness.CONVERSATION_ID
        instrumentation = "openinference-instrumentation-openai"
    client = scripted_client()

    def run() -> list[str | None]:
        if scenario == "heldout_openai_openinference":
            with using_session(harness.CONVERSATION_ID):
                return run_turns(client, turn_attributes)
        return run_turns(client, turn_attributes)

    capture = support.run_instrumented(scenario, install, run)
    meta = support.meta(
        "openai", instrumentation, settings=settings, notes=notes, agent_name=None, **conversation
    )
    return capture.write(scenario, meta)


if __name__ == "__main__":
    raise SystemExit(support.run_cli(dict.fromkeys(SCENARIOS, generate), __doc__))
