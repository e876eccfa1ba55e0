"""smolagents corpus: the shared scenario run by a real smolagents `ToolCallingAgent`,
traced by OpenInference's smolagents instrumentation; only the model is scripted.

Why the model answers with a `final_answer` tool call: a ToolCallingAgent only ends a run
when the model calls its built-in `final_answer` tool; that is how the framework works, so
the scripted final text is sent as `final_answer(answer=<text>)`. It is not one of the
scenario's tool calls: the truth lists the three scenario tools, and the answer is its text.

Why the scripted model class is registered in the `smolagents` namespace before the
instrumentor runs: OpenInference wraps `generate` only on the model classes smolagents
exports (those it finds in `vars(smolagents)`), so a user's own `Model` subclass would get
no LLM span at all. Registering it makes it traced exactly like a built-in model class.

Why `Tool` subclasses instead of `@tool`: smolagents' decorator requires a docstring with
an `Args:` section; the harness functions are kept as they are and wrapped in `Tool`
classes that declare their inputs, which is the framework's other documented way.

Run inside the smolagents environment (see requirements.txt):
    python generate.py --list | [SCENARIO...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, ClassVar

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import generator_support as support
import harness

# smolagents agent names must be identifiers, so the harness name cannot be used as is.
SMOL_AGENT_NAME = harness.AGENT_NAME.replace("-", "_")


def build_tools() -> list[Any]:
    """The harness functions as smolagents `Tool`s with their real signatures."""
    from smolagents import Tool

    class GetWeather(Tool):  # type: ignore[misc]
        name = "get_weather"
        description = harness.get_weather.__doc__ or ""
        inputs: ClassVar[dict[str, dict[str, str]]] = {
            "city": {"type": "string", "description": "City name."}
        }
        output_type = "string"

        def forward(self, city: str) -> str:
            return harness.get_weather(city)

    class SearchFlights(Tool):  # type: ignore[misc]
        name = "search_flights"
        description = harness.search_flights.__doc__ or ""
        inputs: ClassVar[dict[str, dict[str, str]]] = {
            "origin": {"type": "string", "description": "Departure city."},
            "destination": {"type": "string", "description": "Arrival city."},
            "filters": {"type": "object", "description": "`max_price` (EUR) and `cabin`."},
        }
        output_type = "array"

        def forward(
            self, origin: str, destination: str, filters: dict[str, Any]
        ) -> list[dict[str, Any]]:
            return harness.search_flights(origin, destination, filters)

    class BookFlight(Tool):  # type: ignore[misc]
        name = "book_flight"
        description = harness.book_flight.__doc__ or ""
        inputs: ClassVar[dict[str, dict[str, str]]] = {
            "flight_id": {"type": "string", "description": "Flight id."}
        }
        output_type = "object"

        def forward(self, flight_id: str) -> dict[str, Any]:
            return harness.book_flight(flight_id)

    return [GetWeather(), SearchFlights(), BookFlight()]


def build_model() -> Any:
    """The scripted model, registered where the instrumentor looks for model classes."""
    import smolagents
    from smolagents.models import (
        ChatMessage,
        ChatMessageToolCall,
        ChatMessageToolCallFunction,
        MessageRole,
        Model,
    )
    from smolagents.monitoring import TokenUsage

    steps = harness.model_steps()
    finals = iter(range(1, len(harness.TURNS) + 1))

    class ScriptedModel(Model):  # type: ignore[misc]
        """Replays `harness.model_steps()`; the final text becomes a final_answer call."""

        def generate(
            self,
            messages: list[Any],
            stop_sequences: list[str] | None = None,
            response_format: dict[str, str] | None = None,
            tools_to_call_from: list[Any] | None = None,
            **kwargs: Any,
        ) -> Any:
            step = next(steps)
            calls = [(c.id, c.name, c.arguments) for c in step.tool_calls]
            if step.text is not None:
                calls.append((f"call_final{next(finals)}", "final_answer", {"answer": step.text}))
            tool_calls = [
                ChatMessageToolCall(
                    id=call_id,
                    type="function",
                    function=ChatMessageToolCallFunction(name=name, arguments=arguments),
                )
                for call_id, name, arguments in calls
            ]
            prompt_tokens = len(json.dumps([str(m) for m in messages])) // 4
            return ChatMessage(
                role=MessageRole.ASSISTANT,
                content=None,
                tool_calls=tool_calls,
                token_usage=TokenUsage(input_tokens=prompt_tokens, output_tokens=12 * len(calls)),
            )

    smolagents.ScriptedModel = ScriptedModel  # type: ignore[attr-defined]
    return ScriptedModel


def generate(scenario: str) -> Path:
    settings = harness.content_capture_env()
    capture = harness.Capture()
    model_class = build_model()

    from openinference.instrumentation import using_session
    from openinference.instrumentation.smolagents import SmolagentsInstrumentor

    support.instrument(capture, SmolagentsInstrumentor)
    from smolagents import ToolCallingAgent

    agent = ToolCallingAgent(
        tools=build_tools(),
        model=model_class(model_id=support.MODEL_NAME),
        name=SMOL_AGENT_NAME,
        instructions=harness.SYSTEM_PROMPT,
        max_steps=6,
        verbosity_level=0,
    )
    answers = []
    with using_session(harness.CONVERSATION_ID):
        for index, turn in enumerate(harness.TURNS):
            answers.append(agent.run(turn.query, reset=index == 0))
    support.check_answers(scenario, answers)
    settings["openinference using_session"] = harness.CONVERSATION_ID
    settings["agent.run(reset)"] = "True for turn 1, False for turn 2"
    settings["smolagents.ScriptedModel"] = "scripted model class registered before instrument()"
    notes = [
        f"smolagents agent names must be identifiers: the agent is named {SMOL_AGENT_NAME!r}.",
        "Session id: OpenInference's using_session context (the documented way); both turns "
        "run on one agent, turn 2 with reset=False so it continues the agent's memory.",
        "Each turn ends with the framework's own final_answer tool call (id call_final1 / "
        "call_final2) carrying the answer; it is not one of the scenario's tool calls.",
        "The failing book_flight raises; smolagents wraps it in AgentToolExecutionError "
        "(\"Error executing tool 'book_flight' with arguments {...}: ToolFailure: flight "
        "FL-404 is sold out ...\") and feeds that back to the model as the step's error.",
        "smolagents hands tool results to the model as str(result) observations; the truth "
        "keeps the plain results.",
        "The scripted model class is added to the smolagents module namespace before "
        "SmolagentsInstrumentor().instrument(): OpenInference only wraps the model classes "
        "smolagents exports, so a custom Model subclass would otherwise have no LLM span.",
        "OpenInference records content by default (its OPENINFERENCE_HIDE_* switches are "
        "unset); the OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT switch has no effect "
        "on it.",
        "Token counts are a size estimate of the messages made by the scripted model.",
    ]
    meta = support.meta(
        "smolagents",
        "openinference-instrumentation-smolagents",
        settings=settings,
        agent_name=SMOL_AGENT_NAME,
        notes=notes,
    )
    return capture.write(scenario, meta)


SCENARIOS = {"smolagents_openinference": generate}

if __name__ == "__main__":
    raise SystemExit(support.run_cli(SCENARIOS, __doc__))
