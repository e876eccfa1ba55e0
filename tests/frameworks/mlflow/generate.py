"""MLflow tracing corpus: a tool-calling agent traced with MLflow's own `@mlflow.trace` /
`mlflow.start_span` spans, exported over OTLP/HTTP as MLflow exports them when
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set.

    python generate.py --list
    python generate.py mlflow_otlp

No agent framework: the agent is the loop most MLflow users trace by hand. Each turn is a
function decorated `@mlflow.trace(span_type=AGENT)` (input: the query, output: the
answer), each scripted model response a `CHAT_MODEL` span (inputs: the chat history and
the offered tools; outputs: the chat-completions body the script dictates, tool calls in
the OpenAI shape), each tool call a `@mlflow.trace(span_type=TOOL)` function (the
failing `book_flight` raises; the loop catches it and tells the model
`{"error": message}`). The session id goes where MLflow keeps it:
`mlflow.update_current_trace(metadata={"mlflow.trace.session": …})`.

Scenarios:

* `mlflow_otlp` — MLflow's native span attributes (`mlflow.spanType`,
  `mlflow.spanInputs`, `mlflow.spanOutputs`, …).
* `mlflow_otlp_genai` — the same with `MLFLOW_ENABLE_OTEL_GENAI_SEMCONV=true`: MLflow
  translates its attributes to the OTel GenAI conventions before the OTLP export.

The export goes through MLflow's own OTLP exporter (`OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=
http/protobuf`) to a loopback receiver in this process (`otlp_sink`).
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

FRAMEWORK = "mlflow"
SESSION_KEY = "mlflow.trace.session"
TOOL_SPECS: list[dict[str, Any]] = [
    {"type": "function", "function": {"name": name, "description": fn.__doc__}}
    for name, fn in harness.TOOLS.items()
]


def run_turns() -> list[str | None]:
    import mlflow
    from mlflow.entities import SpanType

    tools = {
        name: mlflow.trace(fn, name=name, span_type=SpanType.TOOL)
        for name, fn in harness.TOOLS.items()
    }
    steps = enumerate(harness.model_steps())
    history: list[dict[str, Any]] = [{"role": "system", "content": harness.SYSTEM_PROMPT}]

    def chat() -> dict[str, Any]:
        index, step = next(steps)
        with mlflow.start_span(name="chat", span_type=SpanType.CHAT_MODEL) as span:
            span.set_inputs(
                {"model": support.MODEL_NAME, "messages": list(history), "tools": TOOL_SPECS}
            )
            body = support.chat_completion_body(step, index, support.MODEL_NAME)
            span.set_outputs(body)
        message: dict[str, Any] = body["choices"][0]["message"]
        return message

    @mlflow.trace(name=harness.AGENT_NAME, span_type=SpanType.AGENT)
    def travel_agent(query: str) -> str | None:
        mlflow.update_current_trace(metadata={SESSION_KEY: harness.CONVERSATION_ID})
        history.append({"role": "user", "content": query})
        while True:
            message = chat()
            history.append(message)
            if not message.get("tool_calls"):
                text: str | None = message["content"]
                return text
            for call in message["tool_calls"]:
                function = call["function"]
                try:
                    result = tools[function["name"]](**json.loads(function["arguments"]))
                    content = result if isinstance(result, str) else json.dumps(result)
                except harness.ToolFailure as exc:
                    content = json.dumps({"error": str(exc)})
                history.append({"role": "tool", "tool_call_id": call["id"], "content": content})

    return [travel_agent(turn.query) for turn in harness.TURNS]


def generate(scenario: str) -> Path:
    settings = {
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://HOST:4318/v1/traces",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
        "OTEL_SERVICE_NAME": harness.SERVICE_NAME,
        "session": f'mlflow.update_current_trace(metadata={{"{SESSION_KEY}": ...}})',
    }
    if scenario.endswith("_genai"):
        settings["MLFLOW_ENABLE_OTEL_GENAI_SEMCONV"] = "true"
    with otlp_sink.OtlpSink() as sink:
        os.environ.update({k: v for k, v in settings.items() if k.isupper()})
        os.environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = sink.endpoint

        answers = run_turns()
        from mlflow.tracing.provider import get_bridged_tracer_provider

        get_bridged_tracer_provider().force_flush()
    support.check_answers(scenario, answers)
    meta = support.meta(
        FRAMEWORK,
        "mlflow tracing (OTLP export)",
        framework_package="mlflow-tracing",
        instrumentation_package="mlflow-tracing",
        settings=settings,
        **support.per_turn_conversations(),
        notes=[
            "MLflow keeps the session id in trace metadata, which the OTLP export does not "
            "carry: each turn (trace) is its own conversation.",
            "A hand-rolled agent loop traced with @mlflow.trace (AGENT, TOOL) and "
            "mlflow.start_span (CHAT_MODEL); the model is the script (no LLM client).",
            "Exported by MLflow's own OTLP/HTTP exporter to a loopback receiver.",
        ],
    )
    return Path(otlp_sink.write_corpus(scenario, sink.requests(scenario), meta))


SCENARIOS = {"mlflow_otlp": generate, "mlflow_otlp_genai": generate}

if __name__ == "__main__":
    raise SystemExit(support.run_cli(SCENARIOS, __doc__))
