"""Semantic Kernel corpus: the shared scenario with Semantic Kernel's own telemetry.

Run inside the Semantic Kernel environment (see requirements.txt):
`python generate.py semantic_kernel_native`.

Only the model is fake: Semantic Kernel's own `OpenAIChatCompletion` connector, given an
`AsyncOpenAI` client whose HTTP transport (`httpx.MockTransport`) answers each
chat-completions request with the next of `harness.model_steps()` in the API's shape (two
tool calls in turn 1's first step). A `ChatCompletionAgent` with the harness tools as a
plugin auto-invokes the calls; both turns share one `ChatHistoryAgentThread`.

Telemetry is Semantic Kernel's native OpenTelemetry: spans from its agent, model and
function diagnostics, switched on (with message content) by the
`SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS_SENSITIVE` variable; the
prompt/completion events it writes through Python logging are bridged to OpenTelemetry
log records with the SDK's `LoggingHandler`, as Semantic Kernel's telemetry guide does.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from pathlib import Path
from typing import Annotated, Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import generator_support as support
import harness

SCENARIOS = ("semantic_kernel_native",)
PLUGIN = "travel"
DIAGNOSTICS_ENV = {
    "SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS": "true",
    "SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS_SENSITIVE": "true",
}


def plugin_function(tool: str) -> str:
    """Semantic Kernel names plugin functions `<plugin>-<function>`: the model calls those."""
    return f"{PLUGIN}-{tool}"


def scripted_service() -> Any:
    import httpx
    from openai import AsyncOpenAI
    from semantic_kernel.connectors.ai.open_ai import OpenAIChatCompletion

    transport = support.chat_completions_transport(support.MODEL_NAME, plugin_function)
    client = AsyncOpenAI(
        api_key="scripted",
        base_url="http://scripted-model.invalid/v1",
        http_client=httpx.AsyncClient(transport=transport),
    )
    return OpenAIChatCompletion(ai_model_id=support.MODEL_NAME, async_client=client)


def travel_plugin() -> Any:
    """The harness tools as Semantic Kernel functions (plugin `travel`)."""
    from semantic_kernel.functions import KernelPlugin, kernel_function

    class TravelPlugin:
        @kernel_function(name="get_weather", description=harness.get_weather.__doc__)
        def get_weather(self, city: Annotated[str, "The city"]) -> str:
            return harness.get_weather(city)

        @kernel_function(name="search_flights", description=harness.search_flights.__doc__)
        def search_flights(
            self,
            origin: Annotated[str, "Origin city"],
            destination: Annotated[str, "Destination city"],
            filters: Annotated[dict[str, Any], "max_price (EUR) and cabin"],
        ) -> list[dict[str, Any]]:
            return harness.search_flights(origin, destination, filters)

        @kernel_function(name="book_flight", description=harness.book_flight.__doc__)
        def book_flight(self, flight_id: Annotated[str, "The flight id"]) -> dict[str, Any]:
            return harness.book_flight(flight_id)

    return KernelPlugin.from_object(PLUGIN, TravelPlugin())


def build_agent(service: Any) -> Any:
    from semantic_kernel.agents import ChatCompletionAgent

    return ChatCompletionAgent(
        service=service,
        name=harness.AGENT_NAME,
        instructions=harness.SYSTEM_PROMPT,
        plugins=[travel_plugin()],
    )


async def run_turns(agent: Any) -> list[str]:
    from semantic_kernel.agents import ChatHistoryAgentThread

    thread = ChatHistoryAgentThread()
    answers = []
    for turn in harness.TURNS:
        response = await agent.get_response(messages=turn.query, thread=thread)
        thread = response.thread
        answers.append(str(response.content))
    await check_tools_ran(thread)
    return answers


async def check_tools_ran(thread: Any) -> None:
    """The answers are scripted, so check the thread holds a result for every call."""
    from semantic_kernel.contents import FunctionResultContent

    results = [
        item.id
        async for message in thread.get_messages()
        for item in message.items
        if isinstance(item, FunctionResultContent)
    ]
    scripted = [call.id for step in harness.model_steps() for call in step.tool_calls]
    if sorted(results) != sorted(scripted):
        raise SystemExit(f"tool results for {results}, the script called {scripted}")


def bridge_logging(capture: harness.Capture) -> None:
    """Semantic Kernel writes its GenAI events through Python logging: forward them."""
    from opentelemetry.sdk._logs import LoggingHandler

    handler = LoggingHandler(level=logging.INFO, logger_provider=capture.logger_provider)
    sk_logger = logging.getLogger("semantic_kernel")
    sk_logger.setLevel(logging.INFO)
    sk_logger.addHandler(handler)


def generate(scenario: str) -> Path:
    # Read when semantic_kernel is imported: set before any import of it.
    os.environ.update(DIAGNOSTICS_ENV)
    settings = {**harness.content_capture_env(), **DIAGNOSTICS_ENV}
    capture = harness.Capture()
    bridge_logging(capture)
    settings["logging.getLogger('semantic_kernel')"] = "INFO -> opentelemetry LoggingHandler"
    agent = build_agent(scripted_service())
    support.check_answers(scenario, asyncio.run(run_turns(agent)))
    meta = support.meta(
        "semantic-kernel",
        "semantic-kernel (native OpenTelemetry)",
        instrumentation_package="semantic-kernel",
        settings=settings,
        **support.per_turn_conversations(),
        notes=[
            "Model: semantic_kernel's OpenAIChatCompletion with an AsyncOpenAI client over "
            f"an in-process httpx.MockTransport replaying the script (model {support.MODEL_NAME!r}).",
            "Tools: a plugin 'travel' whose kernel functions call the harness functions; "
            "the model calls them as 'travel-<tool>' (Semantic Kernel's function naming), "
            "the tool names in the truth are the plain ones.",
            "Both turns are ChatCompletionAgent.get_response calls on one "
            "ChatHistoryAgentThread, but no thread/session id reaches the spans: each "
            "turn is its own trace and conversation (ids derived from the traces).",
            "Turn 1's two get_weather calls come from one model response; Semantic "
            "Kernel's auto function invocation runs them concurrently (asyncio.gather).",
            "book_flight('FL-404') raises: Semantic Kernel catches it and gives the model "
            "an error result.",
            "Prompt/completion events arrive as OpenTelemetry log records (Python logging "
            "bridged with LoggingHandler).",
        ],
    )
    return capture.write(scenario, meta)


if __name__ == "__main__":
    raise SystemExit(support.run_cli(dict.fromkeys(SCENARIOS, generate), __doc__))
