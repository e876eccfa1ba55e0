"""Langfuse's OpenTelemetry-based Python SDK corpus: the shared travel scenario as a
hand-rolled agent loop instrumented with Langfuse observations.

    python generate.py --list
    python generate.py langfuse_sdk

Each turn is an `agent` observation (input: the user's query, output: the answer) under
`propagate_attributes(session_id=CONVERSATION_ID)`; each scripted model response is a
`generation` observation (input: the chat history, output: the assistant message with its
`tool_calls` in the OpenAI chat shape), each tool call a `tool` observation (input: the
arguments, output: the result; the failing call `level="ERROR"` with the message). The
Langfuse client exports through its own span processor to the harness's in-memory
exporter (`span_exporter=`), on a tracer provider of its own, so nothing leaves the
process; the OTLP files are what it would send to an OTLP endpoint.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import generator_support as support
import harness

FRAMEWORK = "langfuse"


def _assistant(step: harness.Step) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": step.text,
        "tool_calls": [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
            }
            for call in step.tool_calls
        ],
    }


def generate(scenario: str) -> Path:
    from langfuse import Langfuse, propagate_attributes
    from opentelemetry.sdk.trace import TracerProvider

    capture = harness.Capture(install=False)
    langfuse = Langfuse(
        public_key="pk-lf-offline",
        secret_key="sk-lf-offline",
        base_url="http://127.0.0.1:9",
        tracer_provider=TracerProvider(resource=capture.resource),
        span_exporter=capture.span_exporter,
    )
    history: list[dict[str, Any]] = [{"role": "system", "content": harness.SYSTEM_PROMPT}]
    answers: list[str | None] = []
    with propagate_attributes(session_id=harness.CONVERSATION_ID):
        for turn in harness.TURNS:
            history.append({"role": "user", "content": turn.query})
            with langfuse.start_as_current_observation(
                as_type="agent", name=harness.AGENT_NAME, input=turn.query
            ) as agent:
                for step in turn.steps:
                    with langfuse.start_as_current_observation(
                        as_type="generation",
                        name="chat",
                        model=support.MODEL_NAME,
                        input=list(history),
                    ) as generation:
                        message = _assistant(step)
                        generation.update(output=message)
                    history.append(message)
                    for call in step.tool_calls:
                        with langfuse.start_as_current_observation(
                            as_type="tool", name=call.name, input=call.arguments
                        ) as tool:
                            result, error = harness.run_tool(call)
                            if error is None:
                                tool.update(output=result)
                            else:
                                tool.update(level="ERROR", status_message=error)
                        content = json.dumps(result) if error is None else f"Error: {error}"
                        history.append(
                            {"role": "tool", "tool_call_id": call.id, "content": content}
                        )
                agent.update(output=turn.answer)
            answers.append(turn.answer)
    langfuse.flush()
    langfuse.shutdown()
    support.check_answers(scenario, answers)
    meta = support.meta(
        FRAMEWORK,
        "langfuse (built in, OpenTelemetry)",
        framework_package="langfuse",
        instrumentation_package="langfuse",
        settings={"session": "propagate_attributes(session_id=CONVERSATION_ID)"},
        notes=[
            "a hand-rolled agent loop: agent / generation / tool observations; the model is "
            "the script (no LLM client)",
            "Langfuse(span_exporter=..., tracer_provider=TracerProvider(...)): exported to the "
            "harness in memory, not to a Langfuse host",
        ],
    )
    return capture.write(scenario, meta)


SCENARIOS = {"langfuse_sdk": generate}

if __name__ == "__main__":
    raise SystemExit(support.run_cli(SCENARIOS, __doc__))
