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
* `heldout_openai_otel_contrib_no_content` — the default scenario as a user who did not
  switch content capture on gets it (the instrumentation's default): no message content.
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
* `heldout_openai_openinference_responses`, `heldout_openai_openllmetry_responses` — the
  same loop on the Responses API (`client.responses.create`; `function_call` output
  items, `function_call_output` input items carrying the results), which the OTel
  contrib `openai-v2` instrumentation does not trace.
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
    "heldout_openai_otel_contrib_no_content",
    "heldout_openai_openinference",
    "heldout_openai_openllmetry",
    "heldout_openai_openinference_responses",
    "heldout_openai_openllmetry_responses",
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


def run_call(name: str, arguments: str) -> str:
    """Run one requested call; what the loop tells the model (JSON text, a string as it
    is, a failure as `{"error": message}`)."""
    try:
        result = harness.TOOLS[name](**json.loads(arguments))
    except harness.ToolFailure as exc:
        return json.dumps({"error": str(exc)})
    return result if isinstance(result, str) else json.dumps(result)


def tool_message(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": run_call(name, arguments)}


def responses_body(step: harness.Step, index: int) -> dict[str, Any]:
    """A script step as the Responses API would answer it."""
    output: list[dict[str, Any]]
    if step.tool_calls:
        output = [
            {
                "type": "function_call",
                "id": f"fc_{c.id}",
                "call_id": c.id,
                "name": c.name,
                "arguments": json.dumps(c.arguments),
                "status": "completed",
            }
            for c in step.tool_calls
        ]
    else:
        output = [
            {
                "type": "message",
                "id": f"msg_{index}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": step.text, "annotations": []}],
            }
        ]
    return {
        "id": f"resp_scripted_{index}",
        "object": "response",
        "created_at": 1_700_000_000 + index,
        "model": support.MODEL_NAME,
        "status": "completed",
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": 0,
            "output_tokens": 0,
            "total_tokens": 0,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }


def responses_client() -> Any:
    import httpx
    from openai import OpenAI

    steps = enumerate(harness.model_steps())

    def respond(request: httpx.Request) -> httpx.Response:
        if request.method != "POST" or not request.url.path.endswith("/responses"):
            return httpx.Response(404, json={"error": {"message": f"unscripted {request.url}"}})
        index, step = next(steps)
        return httpx.Response(200, json=responses_body(step, index))

    return OpenAI(
        api_key="scripted",
        base_url="http://scripted-model.invalid/v1",
        http_client=httpx.Client(transport=httpx.MockTransport(respond)),
    )


def run_turns_responses(client: Any, turn_attributes: dict[str, str]) -> list[str | None]:
    """The same loop on the Responses API: the history is a list of input items."""
    from opentelemetry import trace

    tracer = trace.get_tracer("travel-agent-app")
    tools = [{"type": "function", **spec["function"]} for spec in TOOL_SPECS]
    items: list[dict[str, Any]] = []
    answers: list[str | None] = []
    for turn in harness.TURNS:
        with tracer.start_as_current_span(TURN_SPAN, attributes=turn_attributes):
            items.append({"role": "user", "content": turn.query})
            while True:
                response = client.responses.create(
                    model=support.MODEL_NAME,
                    instructions=harness.SYSTEM_PROMPT,
                    input=items,
                    tools=tools,
                )
                calls = [o for o in response.output if o.type == "function_call"]
                items.extend(o.model_dump(exclude_none=True) for o in response.output)
                if not calls:
                    answers.append(response.output_text)
                    break
                for call in calls:
                    items.append(
                        {
                            "type": "function_call_output",
                            "call_id": call.call_id,
                            "output": run_call(call.name, call.arguments),
                        }
                    )
    return answers


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
    if scenario.endswith("_no_content"):
        settings: dict[str, str] = {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "unset"}
        for name in (
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
            "TRACELOOP_TRACE_CONTENT",
        ):
            os.environ.pop(name, None)
    else:
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
    elif scenario.startswith("heldout_openai_openllmetry"):
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
    responses_api = scenario.endswith("_responses")
    client = responses_client() if responses_api else scripted_client()
    loop = run_turns_responses if responses_api else run_turns
    if responses_api:
        settings["api"] = "responses"
        notes.append("The loop uses the Responses API (client.responses.create).")

    def run() -> list[str | None]:
        if scenario.startswith("heldout_openai_openinference"):
            with using_session(harness.CONVERSATION_ID):
                return loop(client, turn_attributes)
        return loop(client, turn_attributes)

    capture = support.run_instrumented(scenario, install, run)
    meta = support.meta(
        "openai", instrumentation, settings=settings, notes=notes, agent_name=None, **conversation
    )
    return capture.write(scenario, meta)


if __name__ == "__main__":
    raise SystemExit(support.run_cli(dict.fromkeys(SCENARIOS, generate), __doc__))
