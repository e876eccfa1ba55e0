"""Haystack corpus: the shared scenario with a Haystack `Agent` and OpenInference.

Run inside the Haystack environment (see requirements.txt):
`python generate.py haystack_openinference`.

Only the model is fake: Haystack's own `MockChatGenerator` (a real chat-generator
component) cycles through `harness.model_steps()` as assistant `ChatMessage`s carrying
`ToolCall`s (two in turn 1's first step: the Agent's `ToolInvoker` runs them concurrently).
The `Agent` runs the harness tools as `Tool`s built with `create_tool_from_function`;
multi-turn is Haystack's way, the second run gets the first run's messages back.
The session id comes from OpenInference's `using_session`.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import harness

SCENARIOS = ("haystack_openinference",)
MODEL_NAME = "scripted-travel-model"
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
    return MockChatGenerator(responses=replies, model=MODEL_NAME)


def build_agent(generator: Any) -> Any:
    from haystack.components.agents import Agent
    from haystack.tools import create_tool_from_function

    return Agent(
        chat_generator=generator,
        tools=[create_tool_from_function(fn, name=name) for name, fn in harness.TOOLS.items()],
        system_prompt=harness.SYSTEM_PROMPT,
    )


def run_turns(agent: Any) -> list[str]:
    from haystack.dataclasses import ChatMessage
    from openinference.instrumentation import using_session

    history: list[Any] = []
    answers = []
    with using_session(harness.CONVERSATION_ID):
        for turn in harness.TURNS:
            result = agent.run(messages=[*history, ChatMessage.from_user(turn.query)])
            answers.append(result["last_message"].text)
            # The agent returns the whole conversation (system prompt first): carry it over.
            history = [m for m in result["messages"] if not m.is_from("system")]
    return answers


def generate(scenario: str) -> Path:
    if scenario not in SCENARIOS:
        raise SystemExit(f"unknown scenario {scenario!r}; known: {', '.join(SCENARIOS)}")
    os.environ.update(OFFLINE_ENV)
    settings = {**harness.content_capture_env(), **OFFLINE_ENV}
    capture = harness.Capture()
    # The instrumentor wraps the component classes registered when it starts (and those
    # a Pipeline runs later): import the ones the Agent uses first, it runs outside a Pipeline.
    # (Haystack's component packages import lazily: name the classes.)
    from haystack.components.agents import Agent  # noqa: F401
    from haystack.components.generators.chat import MockChatGenerator  # noqa: F401
    from openinference.instrumentation.haystack import HaystackInstrumentor

    HaystackInstrumentor().instrument(tracer_provider=capture.tracer_provider)
    settings["openinference.instrumentation.using_session"] = harness.CONVERSATION_ID
    agent = build_agent(scripted_generator())
    agent.warm_up()
    answers = run_turns(agent)
    expected = [turn.answer for turn in harness.TURNS]
    if answers != expected:
        raise SystemExit(
            f"{scenario}: the agent answered {answers!r}, the script said {expected!r}"
        )
    meta = harness.Meta(
        framework="haystack-ai",
        framework_version=harness.package_version("haystack-ai"),
        instrumentation="openinference-instrumentation-haystack",
        instrumentation_version=harness.package_version("openinference-instrumentation-haystack"),
        settings=settings,
        agent_name=None,
        notes=[
            "Model: haystack.components.generators.chat.MockChatGenerator cycling through "
            f"the script's replies (model {MODEL_NAME!r}); tool calls as ToolCall.",
            "The Agent is run directly (no Pipeline); a Haystack Agent has no name, so "
            "agent_name is None.",
            "Multi-turn: turn 2's Agent.run gets turn 1's returned messages (without the "
            "system prompt, which the Agent adds itself) plus the new query.",
            "Session id from openinference.instrumentation.using_session around both turns.",
            "Turn 1's two get_weather calls come from one model reply; the Agent's "
            "ToolInvoker runs them concurrently (tool_concurrency_limit=4).",
            "book_flight('FL-404') raises: with raise_on_tool_invocation_failure=False (the "
            "default) the ToolInvoker turns it into an error tool-result message.",
        ],
    )
    return capture.write(scenario, meta)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenarios", nargs="*")
    parser.add_argument("--list", action="store_true", help="print the scenario names")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(SCENARIOS))
        return
    for scenario in args.scenarios or SCENARIOS:
        print(generate(scenario))


if __name__ == "__main__":
    main()
