"""Held-out corpus: `google-genai` automatic function calling, OTel contrib instrumentation.

Run inside the google_genai environment (see requirements.txt):
`python generate.py heldout_google_genai_otel_contrib` (or another name of `--list`).

Held out: tracepass has no adapter for this stack; it tests the GenAI conventions alone
(issue 10: "held-out traces from frameworks and settings not named here are recovered
wherever their spans carry the data").

No agent framework: a `google.genai` chat (`client.chats.create(...)`, both turns in one
chat, so turn 2 sees the history) with the three harness functions as Python tools; the
SDK's automatic function calling (AFC) runs the calls the model requests and sends the
function responses back until the model answers in text. The instrumentation
(`opentelemetry-instrumentation-google-genai`) traces each `generate_content` call and
wraps the Python tools, so AFC's tool executions are spans too. Only the model is fake:
the real client over an in-process `httpx.MockTransport` answering each
`:generateContent` POST with the next of `harness.model_steps()` in the Gemini REST shape
(two `functionCall` parts in turn 1's first step: parallel). The scripted function calls
carry no `id` (the Gemini Developer API usually sends none).

The application wraps each turn in a plain span `travel-agent turn` (no GenAI
attributes) carrying `session.id`: the instrumentation knows no agent, turn or session.

Scenarios (one process each):

* `heldout_google_genai_otel_contrib` — content `SPAN_ONLY`: messages in
  `gen_ai.input.messages` / `gen_ai.output.messages` on the model spans.
* `heldout_google_genai_otel_contrib_events` — content `EVENT_ONLY`: messages in
  `gen_ai.client.inference.operation.details` OTLP log records.

This instrumentation (on `opentelemetry-util-genai` 1.x) accepts only the mode names:
`true` is rejected ("not a valid option … Defaulting to NO_CONTENT").
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import generator_support as support
import harness

SCENARIOS = ("heldout_google_genai_otel_contrib", "heldout_google_genai_otel_contrib_events")
TURN_SPAN = f"{harness.AGENT_NAME} turn"


def gemini_body(step: harness.Step, index: int) -> dict[str, Any]:
    """A script step as the Gemini `generateContent` REST API would answer it."""
    if step.tool_calls:
        parts: list[dict[str, Any]] = [
            {"functionCall": {"name": c.name, "args": c.arguments}} for c in step.tool_calls
        ]
    else:
        parts = [{"text": step.text}]
    return {
        "candidates": [
            {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {"promptTokenCount": 0, "candidatesTokenCount": 0, "totalTokenCount": 0},
        "modelVersion": support.MODEL_NAME,
        "responseId": f"scripted-{index}",
    }


def search_flights(origin: str, destination: str, filters: dict) -> list[dict]:  # type: ignore[type-arg]
    """Search flights between two cities; `filters` has `max_price` (EUR) and `cabin`."""
    return harness.search_flights(origin, destination, filters)


def afc_tools() -> list[Any]:
    """The harness functions as AFC tools. `search_flights` is re-declared with a bare
    `dict` for `filters`: AFC checks argument types with `isinstance` and fails on the
    harness's `dict[str, Any]` ("typing.Any cannot be used with isinstance()")."""
    return [harness.get_weather, search_flights, harness.book_flight]


def scripted_client() -> Any:
    import httpx
    from google import genai
    from google.genai import types

    steps = enumerate(harness.model_steps())

    def respond(request: Any) -> Any:
        if request.method != "POST" or not request.url.path.endswith(":generateContent"):
            return httpx.Response(404, json={"error": {"message": f"unscripted {request.url}"}})
        index, step = next(steps)
        return httpx.Response(200, json=gemini_body(step, index))

    return genai.Client(
        api_key="scripted",
        http_options=types.HttpOptions(
            base_url="http://scripted-model.invalid",
            httpx_client=httpx.Client(transport=httpx.MockTransport(respond)),
        ),
    )


def run_turns(client: Any) -> list[str | None]:
    from google.genai import types
    from opentelemetry import trace

    tracer = trace.get_tracer("travel-agent-app")
    chat = client.chats.create(
        model=support.MODEL_NAME,
        config=types.GenerateContentConfig(
            system_instruction=harness.SYSTEM_PROMPT,
            tools=afc_tools(),
        ),
    )
    answers: list[str | None] = []
    for turn in harness.TURNS:
        with tracer.start_as_current_span(
            TURN_SPAN, attributes={"session.id": harness.CONVERSATION_ID}
        ):
            answers.append(chat.send_message(turn.query).text)
    return answers


def generate(scenario: str) -> Path:
    settings = harness.content_capture_env()
    mode = {
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "EVENT_ONLY"
        if scenario.endswith("_events")
        else "SPAN_ONLY"
    }
    os.environ.update(mode)
    settings.update(mode)
    settings["turn span attribute session.id"] = harness.CONVERSATION_ID
    from opentelemetry.instrumentation.google_genai import GoogleGenAiSdkInstrumentor

    client = scripted_client()
    capture = support.run_instrumented(
        scenario,
        support.installer(GoogleGenAiSdkInstrumentor, logs=True),
        lambda: run_turns(client),
    )
    meta = support.meta(
        "google-genai",
        "opentelemetry-instrumentation-google-genai",
        settings=settings,
        agent_name=None,
        notes=[
            "No framework: a google.genai chat with automatic function calling over the "
            "harness functions; the real client talks to an in-process httpx.MockTransport "
            f"(model {support.MODEL_NAME!r}); the scripted functionCall parts carry no id.",
            f"The application wraps each turn in a plain span {TURN_SPAN!r} with session.id "
            "(the instrumentation has no session notion).",
            "AFC sends a failing function's exception text to the model as {'error': text}; "
            "other results as {'result': value}. The truth keeps the plain results.",
        ],
    )
    return capture.write(scenario, meta)


if __name__ == "__main__":
    raise SystemExit(support.run_cli(dict.fromkeys(SCENARIOS, generate), __doc__))
