"""LiteLLM corpus: a hand-rolled tool loop on `litellm.completion` with LiteLLM's own
OpenTelemetry callback (`litellm.callbacks = ["otel"]`) exporting real OTLP/HTTP.

    python generate.py --list
    python generate.py litellm_otel

No agent framework: the application calls `litellm.completion(...)` with the three
harness tools as OpenAI function tools, runs each requested call itself, appends a
`tool` message per call and asks again until the model answers in text (both turns share
one history). Only the model is fake: LiteLLM's own `mock_response=` returns the script's
step as a chat-completions body, so the call goes through LiteLLM's logging and callbacks
as a real one does.

The callback is configured as a user configures it, through the environment:
`OTEL_EXPORTER=otlp_http` and `OTEL_ENDPOINT` pointing at a loopback OTLP/HTTP receiver
in this process (protobuf bodies, decoded with `opentelemetry-proto` and written as
OTLP/JSON). LiteLLM builds its own tracer provider (service name `OTEL_SERVICE_NAME`) and
installs it globally; the application's turn span (`travel-agent turn`, carrying
`session.id`, as in the held-out openai loop) uses the same provider, so each turn's
`litellm_request` spans are its children. Tools are not traced: calls are seen as the
model's requests and the next request's `tool` messages; a tool error goes to the model as
`{"error": message}` JSON.
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
import otlp_sink

FRAMEWORK = "litellm"
TURN_SPAN = f"{harness.AGENT_NAME} turn"
#: LiteLLM routes a model name by its provider prefix; `mock_response` answers before any
#: request is made, so the provider is never contacted.
MODEL = f"openai/{support.MODEL_NAME}"

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


def run_call(name: str, arguments: str) -> str:
    """What the loop tells the model: JSON text (a string as it is), a failure as
    `{"error": message}`."""
    try:
        result = harness.TOOLS[name](**json.loads(arguments))
    except harness.ToolFailure as exc:
        return json.dumps({"error": str(exc)})
    return result if isinstance(result, str) else json.dumps(result)


def run_turns() -> list[str | None]:
    import litellm
    from opentelemetry import trace

    steps = enumerate(harness.model_steps())
    tracer = trace.get_tracer("travel-agent-app")
    messages: list[dict[str, Any]] = [{"role": "system", "content": harness.SYSTEM_PROMPT}]
    answers: list[str | None] = []
    for turn in harness.TURNS:
        with tracer.start_as_current_span(
            TURN_SPAN, attributes={"session.id": harness.CONVERSATION_ID}
        ):
            messages.append({"role": "user", "content": turn.query})
            while True:
                index, step = next(steps)
                reply = (
                    litellm.completion(
                        model=MODEL,
                        messages=messages,
                        tools=TOOL_SPECS,
                        mock_response=support.chat_completion_body(step, index, support.MODEL_NAME),
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
                        {
                            "role": "tool",
                            "tool_call_id": call.id,
                            "content": run_call(call.function.name, call.function.arguments),
                        }
                    )
    return answers


def generate(scenario: str) -> Path:
    settings = {
        "litellm.callbacks": '[OpenTelemetry()] (= ["otel"], built at start-up)',
        "USE_OTEL_LITELLM_REQUEST_SPAN": "true",
        "OTEL_EXPORTER": "otlp_http",
        "OTEL_ENDPOINT": "http://127.0.0.1:PORT/v1/traces",
        "OTEL_SERVICE_NAME": harness.SERVICE_NAME,
        "turn span attribute session.id": harness.CONVERSATION_ID,
    }
    with otlp_sink.OtlpSink() as sink:
        os.environ.update(
            {
                "OTEL_EXPORTER": "otlp_http",
                "OTEL_ENDPOINT": sink.endpoint,
                "OTEL_SERVICE_NAME": harness.SERVICE_NAME,
                "USE_OTEL_LITELLM_REQUEST_SPAN": "true",
                "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            }
        )
        import litellm
        from litellm.integrations.opentelemetry import OpenTelemetry
        from opentelemetry import trace

        # What `litellm.callbacks = ["otel"]` builds on the first call, built before the
        # first turn span so that span is recorded by the provider it installs.
        litellm.callbacks = [OpenTelemetry()]
        answers = run_turns()
        provider: Any = trace.get_tracer_provider()
        provider.force_flush()
        provider.shutdown()
    support.check_answers(scenario, answers)
    requests = sink.requests(scenario)
    meta = support.meta(
        FRAMEWORK,
        "litellm (built-in otel callback)",
        instrumentation_package="litellm",
        settings=settings,
        agent_name=None,
        notes=[
            "No agent framework: a hand-rolled chat-completions tool loop on "
            "litellm.completion; the model is litellm's mock_response (the script's step "
            "as a chat-completions body).",
            f"The application wraps each turn in a plain span {TURN_SPAN!r} carrying "
            "session.id; tools are not traced, so calls are seen only as the model's "
            "requests and the next request's tool messages.",
            "Exported by LiteLLM's own OTLP/HTTP exporter (protobuf) to a loopback receiver.",
        ],
    )
    return Path(otlp_sink.write_corpus(scenario, requests, meta))


SCENARIOS = {"litellm_otel": generate}

if __name__ == "__main__":
    raise SystemExit(support.run_cli(SCENARIOS, __doc__))
