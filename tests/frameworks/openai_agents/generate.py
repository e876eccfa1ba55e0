"""OpenAI Agents SDK corpus: the shared travel scenario under two instrumentations.

    python generate.py --list
    python generate.py openai_agents_openinference [openai_agents_otel_genai ...]

The agent is an `agents.Agent` with the harness functions as `function_tool`s, run twice
with `Runner.run` in one `SQLiteSession` (the SDK's conversation memory) whose id is the
conversation id; `RunConfig.group_id` carries the same id, the SDK's field for linking the
traces of one conversation.

The model is a custom `agents.Model` replaying `harness.model_steps()` as Responses API
output items (`ResponseFunctionToolCall` / `ResponseOutputMessage`). Like the SDK's own
`OpenAIResponsesModel` it records a `response_span` holding the `Response` and the input,
so instrumentations see the model call as they would see a real one; nothing touches the
network. The SDK's default trace processor (which uploads to OpenAI) is removed with
`set_trace_processors([])` before the instrumentation registers its own.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import generator_support as support
import harness

FRAMEWORK = "openai-agents"
COMMON_NOTES = [
    "session: Runner.run(..., session=SQLiteSession(CONVERSATION_ID), "
    "run_config=RunConfig(group_id=CONVERSATION_ID, workflow_name='travel-workflow'))",
    "tools: function_tool(fn, strict_mode=False, failure_error_function=...) — strict mode "
    "rejects the free-form `filters: dict[str, Any]`; the failure function tells the model "
    "'Error: flight FL-404 is sold out' (the SDK default hides the exception from both the "
    "model and the trace)",
    "the SDK's default OpenAI trace upload is switched off with set_trace_processors([])",
    "the SDK hands tool results to the model as str(result): search_flights' list and "
    "book_flight's dict travel as Python reprs; the truth keeps the plain results",
]


CUSTOM_MODEL_NOTE = (
    "model: a custom agents.Model that records a response_span with a Responses API Response, "
    "as OpenAIResponsesModel does"
)
RESPONSES_MODEL_NOTE = (
    "model: the SDK's own OpenAIResponsesModel on a real AsyncOpenAI client whose HTTP "
    "transport (httpx.MockTransport, no network) answers each POST /v1/responses with the "
    "script's next step as Responses API JSON: only the LLM endpoint is fake"
)


def _tool_failure_message(context: Any, error: Exception) -> str:
    return f"Error: {error}"


def _response(step: harness.Step, index: int, instructions: str | None) -> Any:
    """The step as the Responses API object a real OpenAI model call returns."""
    from openai.types.responses import (
        Response,
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    output: list[Any] = [
        ResponseFunctionToolCall(
            id=f"fc_{call.id}",
            call_id=call.id,
            name=call.name,
            arguments=json.dumps(call.arguments),
            type="function_call",
            status="completed",
        )
        for call in step.tool_calls
    ]
    if step.text is not None:
        output.append(
            ResponseOutputMessage(
                id=f"msg_{index}",
                role="assistant",
                status="completed",
                type="message",
                content=[ResponseOutputText(text=step.text, type="output_text", annotations=[])],
            )
        )
    return Response(
        id=f"resp_{index}",
        created_at=time.time(),
        model=support.MODEL_NAME,
        instructions=instructions,
        object="response",
        output=output,
        parallel_tool_calls=True,
        tool_choice="auto",
        tools=[],
    )


def scripted_model(steps: Iterator[harness.Step] | None = None) -> Any:
    from agents import Model, ModelResponse, Usage
    from agents.tracing import response_span

    class ScriptedModel(Model):
        """Replays the scenario's steps in order, whatever the input (only the LLM is fake)."""

        def __init__(self, steps: Iterator[harness.Step]) -> None:
            self._steps = enumerate(steps)

        async def get_response(
            self,
            system_instructions: str | None,
            input: Any,
            model_settings: Any,
            tools: list[Any],
            output_schema: Any,
            handoffs: list[Any],
            tracing: Any,
            *,
            previous_response_id: str | None = None,
            conversation_id: str | None = None,
            prompt: Any = None,
        ) -> Any:
            index, step = next(self._steps)
            response = _response(step, index, system_instructions)
            with response_span(disabled=tracing.is_disabled()) as span:
                if tracing.include_data():
                    span.span_data.response = response
                    span.span_data.input = input
            return ModelResponse(
                output=response.output, usage=Usage(requests=1), response_id=response.id
            )

        def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            raise NotImplementedError("the scenario runs without streaming")

    return ScriptedModel(harness.model_steps() if steps is None else steps)


def scripted_responses_model() -> Any:
    """`OpenAIResponsesModel` as shipped, talking to a scripted in-process HTTP endpoint."""
    import httpx2 as httpx  # openai 3.x runs on httpx2
    from agents import OpenAIResponsesModel
    from openai import AsyncOpenAI

    steps = enumerate(harness.model_steps())

    def answer(request: httpx.Request) -> httpx.Response:
        if request.method != "POST" or not request.url.path.endswith("/responses"):
            return httpx.Response(404, json={"error": {"message": f"unscripted {request.url}"}})
        index, step = next(steps)
        instructions = json.loads(request.content).get("instructions")
        return httpx.Response(
            200, json=_response(step, index, instructions).model_dump(mode="json")
        )

    client = AsyncOpenAI(
        api_key="offline",
        base_url="http://scripted-llm.invalid/v1",
        max_retries=0,
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(answer)),
    )
    return OpenAIResponsesModel(model=support.MODEL_NAME, openai_client=client)


def build_agent(model: Any) -> Any:
    from agents import Agent, function_tool

    tools = [
        function_tool(fn, strict_mode=False, failure_error_function=_tool_failure_message)
        for fn in harness.TOOLS.values()
    ]
    return Agent(
        name=harness.AGENT_NAME,
        instructions=harness.SYSTEM_PROMPT,
        model=model,
        tools=tools,
    )


async def run_turns(
    model: Any,
    turn_context: Callable[[], AbstractContextManager[Any]],
    build: Callable[[Any], Any] = build_agent,
) -> list[str]:
    from agents import RunConfig, Runner
    from agents.memory.sqlite_session import SQLiteSession

    agent = build(model)
    session = SQLiteSession(harness.CONVERSATION_ID)
    config = RunConfig(group_id=harness.CONVERSATION_ID, workflow_name="travel-workflow")
    answers = []
    for turn in harness.TURNS:
        with turn_context():
            result = await Runner.run(agent, turn.query, session=session, run_config=config)
        answers.append(result.final_output)
    return answers


# --------------------------------------------------------------------------- hand-off

#: The sub-agent that takes over bookings: the triage agent (the harness's travel agent,
#: with `get_weather` only) hands turn 2 to it; it calls the flight tools and answers.
BOOKING_AGENT = "booking-agent"
HANDOFF_CALL_ID = "call_h1"
BOOKING_TOOLS = ("search_flights", "book_flight")


def handoff_tool_name() -> str:
    """The function name the SDK offers the model for the hand-off (`transfer_to_…`)."""
    from agents import Agent, handoff

    return str(handoff(Agent(name=BOOKING_AGENT)).tool_name)


def handoff_steps() -> Iterator[harness.Step]:
    """The script with the hand-off: turn 1 as usual (the triage agent), turn 2 starts with
    the triage agent's `transfer_to_booking_agent` call, then the booking agent's steps."""
    first, second = harness.TURNS
    yield from first.steps
    yield harness.Step(tool_calls=(harness.ToolCall(HANDOFF_CALL_ID, handoff_tool_name(), {}),))
    yield from second.steps


def build_handoff_agent(model: Any) -> Any:
    from agents import Agent, function_tool

    def tool(name: str) -> Any:
        fn = harness.TOOLS[name]
        return function_tool(fn, strict_mode=False, failure_error_function=_tool_failure_message)

    booking = Agent(
        name=BOOKING_AGENT,
        instructions="You book flights. Use the tools.",
        model=model,
        tools=[tool(name) for name in BOOKING_TOOLS],
    )
    return Agent(
        name=harness.AGENT_NAME,
        instructions=harness.SYSTEM_PROMPT + " Hand bookings to the booking agent.",
        model=model,
        tools=[tool("get_weather")],
        handoffs=[booking],
    )


def handoff_truth(document: dict[str, Any]) -> dict[str, Any]:
    """The expected document plus who did what: each call's agent and each turn's steps
    (turn 1: the triage agent alone, no steps; turn 2: the triage agent, then the booking
    agent it handed off to)."""
    for conversation in document["conversations"]:
        for turn in conversation["turns"]:
            booking = any(c["name"] in BOOKING_TOOLS for c in turn["tool_calls"])
            for call in turn["tool_calls"]:
                call["agent"] = (
                    BOOKING_AGENT if call["name"] in BOOKING_TOOLS else harness.AGENT_NAME
                )
            turn["steps"] = (
                [
                    {"agent": harness.AGENT_NAME, "kind": "agent"},
                    {"agent": BOOKING_AGENT, "kind": "handoff"},
                ]
                if booking
                else []
            )
    return document


def openinference_handoff(scenario: str) -> Path:
    """OpenInference on the two-agent hand-off run (see `build_handoff_agent`)."""
    from openinference.instrumentation import using_session
    from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

    path = _generate(
        scenario,
        install=support.installer(OpenAIAgentsInstrumentor),
        instrumentation="openinference-instrumentation-openai-agents",
        settings={
            **harness.content_capture_env(),
            "session": "openinference.instrumentation.using_session(CONVERSATION_ID) per run",
        },
        notes=[
            "two agents: the triage agent (travel-agent, get_weather) hands turn 2 to "
            "booking-agent (search_flights, book_flight) through the SDK's handoffs=[...]; "
            "the script's extra step is the triage agent's transfer_to_booking_agent call",
        ],
        turn_context=lambda: using_session(harness.CONVERSATION_ID),
        model=lambda: scripted_model(handoff_steps()),
        agent=build_handoff_agent,
    )
    expected = path.with_name(f"{scenario}.expected.json")
    expected.write_text(
        json.dumps(handoff_truth(json.loads(expected.read_text())), indent=2) + "\n"
    )
    return path


def _generate(
    scenario: str,
    *,
    install: support.Installer,
    instrumentation: str,
    settings: dict[str, str],
    distribution: str | None = None,
    notes: Sequence[str] = (),
    turn_context: Callable[[], AbstractContextManager[Any]] = nullcontext,
    model: Callable[[], Any] = scripted_model,
    grouping: dict[str, Any] | None = None,
    agent: Callable[[Any], Any] | None = None,
) -> Path:
    from agents import flush_traces, set_trace_processors

    set_trace_processors([])  # no upload to OpenAI: the instrumentation adds its own

    def run() -> list[str]:
        answers = asyncio.run(run_turns(model(), turn_context, agent or build_agent))
        flush_traces()
        return answers

    capture = support.run_instrumented(scenario, install, run)
    meta = support.meta(
        FRAMEWORK,
        instrumentation,
        instrumentation_package=distribution,
        settings=settings,
        notes=[
            *COMMON_NOTES,
            RESPONSES_MODEL_NOTE if model is scripted_responses_model else CUSTOM_MODEL_NOTE,
            *notes,
        ],
        **(grouping or {}),
    )
    return capture.write(scenario, meta)


def openinference(scenario: str) -> Path:
    from openinference.instrumentation import using_session
    from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

    return _generate(
        scenario,
        install=support.installer(OpenAIAgentsInstrumentor),
        instrumentation="openinference-instrumentation-openai-agents",
        settings={
            **harness.content_capture_env(),
            "session": "openinference.instrumentation.using_session(CONVERSATION_ID) per run",
        },
        notes=[
            "OpenInference ignores RunConfig.group_id; each Runner.run is wrapped in "
            "using_session(CONVERSATION_ID), OpenInference's way to set session.id",
        ],
        turn_context=lambda: using_session(harness.CONVERSATION_ID),
    )


#: The official OpenTelemetry GenAI instrumentation reads the capture mode as an enum
#: name; harness.content_capture_env()'s "true" is not one and would capture nothing.
OTEL_GENAI_CAPTURE = {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY"}


OTEL_GENAI_NOTE = (
    "the official OpenTelemetry instrumentation is published as "
    "opentelemetry-instrumentation-genai-openai-agents (its predecessor "
    "opentelemetry-instrumentation-openai-agents-v2 0.1.0 is not used); it records workflow, "
    "invoke_agent and execute_tool spans only and leaves model calls to "
    "opentelemetry-instrumentation-genai-openai, which patches the openai client"
)
NO_CLIENT_NOTE = (
    "the custom model makes no openai client call, so no span carries the query or the "
    "answer (as for any non-OpenAI model); see openai_agents_otel_genai_responses for the "
    "setup with the client instrumentation"
)
CLIENT_NOTE = (
    "with opentelemetry-instrumentation-genai-openai (OpenAIInstrumentor) as well: its "
    "'chat' spans for each POST /v1/responses carry the messages"
)


def otel_genai(*, with_client: bool) -> support.Generator:
    """The official agents instrumentation; `with_client` adds the openai client's own."""

    def generate(scenario: str) -> Path:
        harness.content_capture_env()
        os.environ.update(OTEL_GENAI_CAPTURE)
        from opentelemetry.instrumentation.genai.openai_agents import OpenAIAgentsInstrumentor

        install = support.installer(
            OpenAIAgentsInstrumentor, logs=True, disable_openai_trace_export=True
        )
        if with_client:
            from opentelemetry.instrumentation.genai.openai import OpenAIInstrumentor

            install = support.together(install, support.installer(OpenAIInstrumentor, logs=True))

        settings = {**OTEL_GENAI_CAPTURE, "disable_openai_trace_export": "True"}
        if with_client:
            version = harness.package_version("opentelemetry-instrumentation-genai-openai")
            settings["opentelemetry-instrumentation-genai-openai"] = version
        return _generate(
            scenario,
            install=install,
            instrumentation="opentelemetry-instrumentation-genai-openai-agents"
            + (" + opentelemetry-instrumentation-genai-openai" if with_client else "")
            + " (OpenTelemetry GenAI)",
            distribution="opentelemetry-instrumentation-genai-openai-agents",
            settings=settings,
            notes=[OTEL_GENAI_NOTE, CLIENT_NOTE if with_client else NO_CLIENT_NOTE],
            model=scripted_responses_model if with_client else scripted_model,
        )

    return generate


def otel_contrib_v2(scenario: str) -> Path:
    """The first OpenTelemetry release (contrib, 2025): its processor maps model spans too."""
    from opentelemetry.instrumentation.openai_agents import OpenAIAgentsInstrumentor

    return _generate(
        scenario,
        install=support.installer(OpenAIAgentsInstrumentor),
        instrumentation="opentelemetry-instrumentation-openai-agents-v2 (OpenTelemetry contrib)",
        distribution="opentelemetry-instrumentation-openai-agents-v2",
        settings=harness.content_capture_env(),
        notes=[
            "the OpenTelemetry contrib release (0.1.0, 2025) that "
            "opentelemetry-instrumentation-genai-openai-agents supersedes; it maps the SDK's "
            "response spans to chat spans itself",
            "it records neither RunConfig.group_id nor any other conversation id: each turn is "
            "its own trace-only conversation",
        ],
        grouping=support.per_turn_conversations(),
    )


SCENARIOS: dict[str, support.Generator] = {
    "openai_agents_openinference": openinference,
    "openai_agents_otel_genai": otel_genai(with_client=False),
    "openai_agents_otel_genai_responses": otel_genai(with_client=True),
    "openai_agents_otel_contrib_v2": otel_contrib_v2,
    "openai_agents_openinference_handoff": openinference_handoff,
}

if __name__ == "__main__":
    raise SystemExit(support.run_cli(SCENARIOS, __doc__))
