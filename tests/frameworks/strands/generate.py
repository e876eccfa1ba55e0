"""Strands Agents corpus: the shared scenario run by a real Strands `Agent` with its native
OpenTelemetry tracing; only the model is scripted.

Why a `Model` subclass that streams Bedrock-style events: that is the provider interface
every Strands model implements (`stream` yields ConverseStream events), so the agent's
event loop, its concurrent tool executor and its tracer run exactly as with a real model.

Why one scenario per process: Strands builds its tracer once per process (a module-level
singleton) and reads `OTEL_SEMCONV_STABILITY_OPT_IN` then, so each setting needs a fresh
interpreter. Asking for several scenarios re-runs this script once per scenario.

Run inside the Strands environment (see requirements.txt):
    python generate.py --list | [SCENARIO...]
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import generator_support as support
import harness

# Scenario name -> the environment switches it needs besides content capture.
SCENARIO_ENV: dict[str, dict[str, str]] = {
    "strands_native": {},
    "strands_native_latest": {"OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental"},
}


def stream_events(step: harness.Step, input_tokens: int) -> Iterator[dict[str, Any]]:
    """One scripted step as the ConverseStream events a Strands provider yields."""
    yield {"messageStart": {"role": "assistant"}}
    index = 0
    if step.text is not None:
        yield {"contentBlockStart": {"contentBlockIndex": index, "start": {}}}
        yield {"contentBlockDelta": {"contentBlockIndex": index, "delta": {"text": step.text}}}
        yield {"contentBlockStop": {"contentBlockIndex": index}}
        index += 1
    for call in step.tool_calls:
        start = {"toolUse": {"toolUseId": call.id, "name": call.name}}
        delta = {"toolUse": {"input": json.dumps(call.arguments)}}
        yield {"contentBlockStart": {"contentBlockIndex": index, "start": start}}
        yield {"contentBlockDelta": {"contentBlockIndex": index, "delta": delta}}
        yield {"contentBlockStop": {"contentBlockIndex": index}}
        index += 1
    yield {"messageStop": {"stopReason": "tool_use" if step.tool_calls else "end_turn"}}
    output_tokens = 12 * (len(step.tool_calls) or 1)
    usage = {
        "inputTokens": input_tokens,
        "outputTokens": output_tokens,
        "totalTokens": input_tokens + output_tokens,
    }
    yield {"metadata": {"usage": usage, "metrics": {"latencyMs": 5}}}


def build_model_class() -> type[Any]:
    """The scripted provider (built lazily: `strands` is imported after the env is set)."""
    from strands.models.model import Model

    class ScriptedModel(Model):
        """Replays `harness.model_steps()`; ignores its input except to count tokens."""

        def __init__(self) -> None:
            self._steps = harness.model_steps()
            # `config` (not a private name): Strands reads `model.config["model_id"]` for
            # gen_ai.request.model, as the built-in providers store it.
            self.config: dict[str, Any] = {"model_id": support.MODEL_NAME}

        def update_config(self, **model_config: Any) -> None:
            self.config.update(model_config)

        def get_config(self) -> dict[str, Any]:
            return self.config

        async def structured_output(  # type: ignore[override]
            self, output_model: Any, prompt: Any, system_prompt: str | None = None, **kwargs: Any
        ) -> AsyncGenerator[dict[str, Any], None]:
            raise NotImplementedError("the scenario uses no structured output")
            yield {}

        async def stream(  # type: ignore[override]
            self,
            messages: Any,
            tool_specs: Any = None,
            system_prompt: str | None = None,
            **kwargs: Any,
        ) -> AsyncIterator[dict[str, Any]]:
            step = next(self._steps)
            input_tokens = await self.count_tokens(messages, tool_specs, system_prompt)
            for event in stream_events(step, input_tokens):
                yield event

    return ScriptedModel


def generate(scenario: str) -> Path:
    settings = harness.content_capture_env()
    settings.update(SCENARIO_ENV[scenario])
    os.environ.update(SCENARIO_ENV[scenario])
    # Strands' Tracer takes the global tracer provider when first used: install ours first.
    capture = harness.Capture()

    from strands import Agent, tool

    agent = Agent(
        model=build_model_class()(),
        tools=[tool(fn) for fn in harness.TOOLS.values()],
        system_prompt=harness.SYSTEM_PROMPT,
        name=harness.AGENT_NAME,
        # The Strands docs' way of tagging a session on the agent's spans.
        trace_attributes={"session.id": harness.CONVERSATION_ID},
        callback_handler=None,
    )
    settings["Agent(trace_attributes)"] = json.dumps({"session.id": harness.CONVERSATION_ID})
    support.check_answers(scenario, [str(agent(turn.query)).strip() for turn in harness.TURNS])

    notes = [
        "Both turns run on one Agent instance (its message history is the conversation); the "
        "session id is only on the spans because trace_attributes puts it there.",
        "Strands catches the failing tool's exception, records it on the tool span (status "
        "ERROR + exception event) and gives the model an error toolResult whose text is "
        "'Error: ToolFailure - flight FL-404 is sold out'.",
        'Strands wraps every tool result in a toolResult content list ([{"text": ...}], '
        "dicts and lists JSON-serialized into that text); the truth keeps the plain results.",
        "The agent span's answer (gen_ai.choice / output messages) carries a trailing newline "
        "that Strands appends; the truth is the model's text without it.",
        "The scripted model streams Bedrock ConverseStream events (Strands' provider interface); "
        "token counts are Strands' own estimate of the input, not a real model's.",
    ]
    meta = support.meta(
        "strands-agents",
        "strands-native",
        instrumentation_package="strands-agents",
        settings=settings,
        notes=notes,
    )
    return capture.write(scenario, meta)


SCENARIOS = dict.fromkeys(SCENARIO_ENV, generate)

if __name__ == "__main__":
    raise SystemExit(support.run_cli(SCENARIOS, __doc__))
