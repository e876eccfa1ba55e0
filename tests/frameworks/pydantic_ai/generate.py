"""pydantic-ai corpus: the shared travel scenario with pydantic-ai's own OpenTelemetry spans.

    python generate.py --list
    python generate.py pydantic_ai_native [pydantic_ai_native_v6]

pydantic-ai instruments itself (this version: `Agent(capabilities=[Instrumentation(
settings=InstrumentationSettings(...))])`; `Agent.instrument_all(...)` is the global
switch): no third-party instrumentation. Scenarios differ only in the instrumentation data format
`version`: the default (5) and 6, the newest, where tool results travel in `role='tool'`
messages as the GenAI semantic conventions pair them.

The model is pydantic-ai's `FunctionModel` (its own test double for "a model controlled by
a local function") replaying `harness.model_steps()` as `ModelResponse`s with
`ToolCallPart`s. Both turns run with `conversation_id=CONVERSATION_ID`, the second with the
first's messages as `message_history` (pydantic-ai keeps no server-side session).
"""

from __future__ import annotations

import asyncio
import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import generator_support as support
import harness

FRAMEWORK = "pydantic-ai"
NOTES = [
    "model: pydantic_ai.models.function.FunctionModel(model_name='scripted-travel-model')",
    "session: Agent.run(query, conversation_id=CONVERSATION_ID, message_history=<previous "
    "turn's all_messages()>)",
    "tool failure: pydantic-ai ends the run on a plain exception; only ModelRetry goes back "
    "to the model, so each tool is wrapped to re-raise harness.ToolFailure as "
    "ModelRetry(str(exc)) (the idiomatic pydantic-ai way); the model sees the message "
    "followed by 'Fix the errors and try again.'",
    "pydantic-ai serializes non-string tool results as JSON for the model; the truth keeps "
    "the plain results",
]


def _retry_on_failure(function: Callable[..., Any]) -> Callable[..., Any]:
    """The harness tool, failing as pydantic-ai tools fail: with `ModelRetry`."""
    from pydantic_ai import ModelRetry

    @functools.wraps(function)
    def tool(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except harness.ToolFailure as exc:
            raise ModelRetry(str(exc)) from exc

    return tool


def scripted_model() -> Any:
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel

    steps = harness.model_steps()

    def respond(messages: list[Any], info: Any) -> ModelResponse:
        step = next(steps)
        parts: list[Any] = [
            ToolCallPart(tool_name=call.name, args=call.arguments, tool_call_id=call.id)
            for call in step.tool_calls
        ]
        if step.text is not None:
            parts.append(TextPart(content=step.text))
        return ModelResponse(parts=parts, model_name=support.MODEL_NAME)

    return FunctionModel(respond, model_name=support.MODEL_NAME)


async def run_turns(instrument: Any) -> list[str]:
    from pydantic_ai import Agent, Tool
    from pydantic_ai.capabilities.instrumentation import Instrumentation

    agent = Agent(
        scripted_model(),
        name=harness.AGENT_NAME,
        instructions=harness.SYSTEM_PROMPT,
        tools=[Tool(_retry_on_failure(fn), takes_ctx=False) for fn in harness.TOOLS.values()],
        capabilities=[Instrumentation(settings=instrument)],
    )
    history: list[Any] = []
    answers = []
    for turn in harness.TURNS:
        result = await agent.run(
            turn.query, conversation_id=harness.CONVERSATION_ID, message_history=history
        )
        answers.append(result.output)
        history = result.all_messages()
    return answers


def native(version: int | None) -> support.Generator:
    def generate(scenario: str) -> Path:
        from pydantic_ai import InstrumentationSettings

        settings = harness.content_capture_env()
        capture = harness.Capture()
        options: dict[str, Any] = {"tracer_provider": capture.tracer_provider}
        if version is not None:
            options["version"] = version
        instrument = InstrumentationSettings(**options)
        support.check_answers(scenario, asyncio.run(run_turns(instrument)))
        meta = support.meta(
            FRAMEWORK,
            "pydantic-ai (built in)",
            framework_package="pydantic-ai-slim",
            instrumentation_package="pydantic-ai-slim",
            settings={
                **settings,
                "Agent.capabilities": "[Instrumentation(settings=InstrumentationSettings("
                f"include_content=True, version={instrument.version}))]",
            },
            notes=NOTES,
        )
        return capture.write(scenario, meta)

    return generate


SCENARIOS: dict[str, support.Generator] = {
    "pydantic_ai_native": native(None),
    "pydantic_ai_native_v6": native(6),
}

if __name__ == "__main__":
    raise SystemExit(support.run_cli(SCENARIOS, __doc__))
