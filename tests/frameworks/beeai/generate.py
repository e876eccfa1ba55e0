"""BeeAI corpus: BeeAI Framework's `ToolCallingAgent` with a scripted chat model, traced
by OpenInference's BeeAI instrumentation.

    python generate.py --list
    python generate.py beeai_openinference

The model is a `ChatModel` subclass replaying the script (tool calls as
`MessageToolCallContent` with the script's ids, the answer as text); the agent runs the
three harness functions as BeeAI `@tool`s. `final_answer_as_tool=False`: the text answer
ends the turn (BeeAI still records it as a call of its own `final_answer` tool). Both
turns run on one agent (its memory keeps the history) inside
`using_session(CONVERSATION_ID)`.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import generator_support as support
import harness

FRAMEWORK = "beeai"


def scripted_model() -> Any:
    from beeai_framework.backend.chat import ChatModel
    from beeai_framework.backend.message import AssistantMessage, MessageToolCallContent
    from beeai_framework.backend.types import ChatModelOutput

    steps = harness.model_steps()

    class ScriptedChatModel(ChatModel):
        @property
        def model_id(self) -> str:
            return support.MODEL_NAME

        @property
        def provider_id(self) -> Any:
            return "openai"

        async def _create(self, input: Any, run: Any) -> Any:
            step = next(steps)
            if step.tool_calls:
                message = AssistantMessage(
                    [
                        MessageToolCallContent(
                            id=c.id, tool_name=c.name, args=json.dumps(c.arguments)
                        )
                        for c in step.tool_calls
                    ]
                )
            else:
                message = AssistantMessage(step.text or "")
            return ChatModelOutput(output=[message], finish_reason="stop")

        async def _create_stream(self, input: Any, run: Any) -> Any:
            yield await self._create(input, run)

    return ScriptedChatModel(allow_parallel_tool_calls=True)


def tools() -> list[Any]:
    from beeai_framework.tools import tool

    @tool
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        return harness.get_weather(city)

    @tool
    def search_flights(origin: str, destination: str, filters: dict[str, Any]) -> str:
        """Search flights between two cities; `filters` has `max_price` (EUR) and `cabin`."""
        return json.dumps(harness.search_flights(origin, destination, filters))

    @tool
    def book_flight(flight_id: str) -> str:
        """Book a flight by id."""
        return json.dumps(harness.book_flight(flight_id))

    return [get_weather, search_flights, book_flight]


def run() -> list[str | None]:
    from beeai_framework.agents.tool_calling import ToolCallingAgent
    from openinference.instrumentation import using_session

    agent = ToolCallingAgent(llm=scripted_model(), tools=tools(), final_answer_as_tool=False)

    async def turns() -> list[str | None]:
        answers: list[str | None] = []
        for turn in harness.TURNS:
            output = await agent.run(turn.query)
            answers.append(output.last_message.text)
        return answers

    with using_session(harness.CONVERSATION_ID):
        return asyncio.run(turns())


def generate(scenario: str) -> Path:
    from openinference.instrumentation.beeai import BeeAIInstrumentor

    capture = support.run_instrumented(scenario, support.installer(BeeAIInstrumentor), run)
    meta = support.meta(
        FRAMEWORK,
        "openinference-instrumentation-beeai",
        framework_package="beeai-framework",
        settings={"using_session": harness.CONVERSATION_ID, "final_answer_as_tool": "False"},
        agent_name=None,
        notes=["The model is a ChatModel subclass replaying the script."],
    )
    return capture.write(scenario, meta)


SCENARIOS = {"beeai_openinference": generate}

if __name__ == "__main__":
    raise SystemExit(support.run_cli(SCENARIOS, __doc__))
