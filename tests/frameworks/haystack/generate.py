"""Haystack corpus: the shared scenario with a Haystack `Agent` and OpenInference.

Run inside the Haystack environment (see requirements.txt):
`python generate.py haystack_openinference` or `haystack_native` (Haystack's own tracing
through the opentelemetry-haystack tracer); one scenario per process.

Only the model is fake: Haystack's own `MockChatGenerator` (a real chat-generator
component) cycles through `harness.model_steps()` as assistant `ChatMessage`s carrying
`ToolCall`s (two in turn 1's first step: the Agent's `ToolInvoker` runs them concurrently).
The `Agent` runs the harness tools as `Tool`s built with `create_tool_from_function`;
multi-turn is Haystack's way, the second run gets the first run's messages back.
The session id comes from OpenInference's `using_session`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import generator_support as support
import harness

SCENARIOS = ("haystack_openinference", "haystack_native")
CONTENT_TRACING = "HAYSTACK_CONTENT_TRACING_ENABLED"
OFFLINE_ENV = {"HAYSTACK_TELEMETRY_ENABLED": "False"}


def scripted_generator() -> Any:
    from haystack.components.generators.chat import MockChatGenerator
    from haystack.dataclasses import ChatMessage, ToolCall

    replies = []
    for step in harness.model_steps():
        if step.tool_calls:
            calls = [
                ToolCall(tool_name=c.name, arguments=dict(c.arguments), id=c.id)
                for c in step.tool_calls
            ]
            replies.append(ChatMessage.from_assistant(tool_calls=calls))
        else:
            assert step.text is not None
            replies.append(ChatMessage.from_assistant(step.text))
    return MockChatGenerator(responses=replies, model=support.MODEL_NAME)


def build_agent(generator: Any) -> Any:
    from haystack.components.agents import Agent
    from haystack.tools import create_tool_from_function

    return Agent(
        chat_generator=generator,
        tools=[create_tool_from_function(fn, name=name) for name, fn in harness.TOOLS.items()],
        system_prompt=harness.SYSTEM_PROMPT,
    )


def run_turns(agent: Any, *, session: bool) -> list[str]:
    from contextlib import nullcontext

    from haystack.dataclasses import ChatMessage
    from openinference.instrumentation import using_session

    history: list[Any] = []
    answers = []
    with using_session(harness.CONVERSATION_ID) if session else nullcontext():
        for turn in harness.TURNS:
            result = agent.run(messages=[*history, ChatMessage.from_user(turn.query)])
            answers.append(result["last_message"].text)
            # The agent returns the whole conversation (system prompt first): carry it over.
            history = [m for m in result["messages"] if not m.is_from("system")]
    return answers


def instrument_openinference(capture: harness.Capture, settings: dict[str, str]) -> None:
    # The instrumentor wraps the component classes registered when it starts (and those
    # a Pipeline runs later): import the ones the Agent uses first, it runs outside a Pipeline.
    # (Haystack's component packages import lazily: name the classes.)
    from haystack.components.agents import Agent  # noqa: F401
    from haystack.components.generators.chat import MockChatGenerator  # noqa: F401
    from openinference.instrumentation.haystack import HaystackInstrumentor

    support.instrument(capture, HaystackInstrumentor)
    settings["openinference.instrumentation.using_session"] = harness.CONVERSATION_ID


def instrument_native(capture: harness.Capture, settings: dict[str, str]) -> None:
    """Haystack's own tracing, sent to OpenTelemetry by the opentelemetry-haystack tracer."""
    # Haystack's tracer proxy reads it once, when haystack is first imported: set it first.
    os.environ[CONTENT_TRACING] = "true"
    settings[CONTENT_TRACING] = "true"
    from haystack import tracing
    from haystack_integrations.tracing.opentelemetry import OpenTelemetryTracer

    assert tracing.tracer.is_content_tracing_enabled, "haystack was imported too early"
    tracing.enable_tracing(OpenTelemetryTracer(capture.tracer_provider.get_tracer("haystack")))
    settings["haystack.tracing.enable_tracing"] = "OpenTelemetryTracer"


def generate(scenario: str) -> Path:
    os.environ.update(OFFLINE_ENV)
    settings = {**harness.content_capture_env(), **OFFLINE_ENV}
    capture = harness.Capture()
    native = scenario == "haystack_native"
    if native:
        instrument_native(capture, settings)
    else:
        instrument_openinference(capture, settings)
    agent = build_agent(scripted_generator())
    agent.warm_up()
    answers = run_turns(agent, session=not native)
    support.check_answers(scenario, answers)
    if native:
        instrumentation = "opentelemetry-haystack"
        grouping = support.per_turn_conversations()
        session_note = (
            "Haystack's tracing has no session id: each Agent.run is its own trace and "
            "its own conversation (ids derived from the traces)."
        )
    else:
        instrumentation = "openinference-instrumentation-haystack"
        grouping = {}
        session_note = (
            "Session id from openinference.instrumentation.using_session around both turns."
        )
    meta = support.meta(
        "haystack-ai",
        instrumentation,
        settings=settings,
        agent_name=None,
        notes=[
            "Model: haystack.components.generators.chat.MockChatGenerator cycling through "
            f"the script's replies (model {support.MODEL_NAME!r}); tool calls as ToolCall.",
            "The Agent is run directly (no Pipeline); a Haystack Agent has no name, so "
            "agent_name is None.",
            "Multi-turn: turn 2's Agent.run gets turn 1's returned messages (without the "
            "system prompt, which the Agent adds itself) plus the new query.",
            session_note,
            "Turn 1's two get_weather calls come from one model reply; the Agent's "
            "tool-calling code runs them concurrently (tool_concurrency_limit=4).",
            "book_flight('FL-404') raises: with raise_on_tool_invocation_failure=False (the "
            "default) the Agent turns it into an error tool-result message "
            "('Failed to invoke Tool ... Error: flight FL-404 is sold out').",
            "Haystack stringifies tool results for the model (str() of the list/dict); the "
            "truth keeps the plain results.",
        ],
        **grouping,
    )
    return capture.write(scenario, meta)


if __name__ == "__main__":
    raise SystemExit(support.run_cli(dict.fromkeys(SCENARIOS, generate), __doc__))
