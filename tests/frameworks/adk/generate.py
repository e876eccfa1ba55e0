"""Google ADK corpus: the shared scenario run by a real ADK `LlmAgent` under an
`InMemoryRunner`, with ADK's built-in OpenTelemetry tracing; only the model is scripted.

Why a `BaseLlm` subclass: it is the model interface every ADK model implements
(`generate_content_async` yields `LlmResponse`s), so ADK's flow, its parallel function
calling and its telemetry run exactly as with Gemini. Turn 1's two `get_weather` calls are
two function-call parts of ONE `LlmResponse`, which ADK executes in parallel.

Why `on_tool_error_callback`: a tool that raises aborts an ADK invocation unless an error
callback turns the exception into a function response; the scenario's failing
`book_flight` must be recovered from, and the callback is ADK's documented way to do it.

Why one scenario per process: ADK resolves its telemetry configuration from the
environment, and the OpenTelemetry globals can only be set once.

Run inside the ADK environment (see requirements.txt):
    python generate.py --list | [SCENARIO...]
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import generator_support as support
import harness

APP_NAME = "travel-app"
USER_ID = "user-1"
# ADK agent names must be Python identifiers, so the harness name cannot be used as is.
ADK_AGENT_NAME = harness.AGENT_NAME.replace("-", "_")

# Scenario name -> environment switches besides `harness.content_capture_env()`.
SCENARIO_ENV: dict[str, dict[str, str]] = {
    "adk_native": {},
    # Content on the spans as well as in the log records (ADK's non-boolean capture modes).
    "adk_native_span_content": {
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_AND_EVENT"
    },
    # ADK's legacy telemetry format (what ADK 1.x emits; kept behind this switch in 2.x):
    # `invocation` / `call_llm` spans and the `gcp.vertex.agent.*` content attributes.
    "adk_native_legacy": {"ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN": "1"},
}

SCENARIO_NOTES: dict[str, list[str]] = {
    "adk_native": [
        "Content capture 'true' means EVENT_ONLY to ADK: messages, tool arguments and results "
        "are only in the gen_ai.client.inference.operation.details log records.",
    ],
    "adk_native_legacy": [
        "ADK's legacy telemetry schema (ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN=1, what ADK 1.x "
        "emits): call_llm spans with gcp.vertex.agent.* content attributes and per-message "
        "log events.",
    ],
}


def build_model(types: Any) -> Any:
    """The scripted model (built lazily: ADK is imported after the env is set)."""
    from google.adk.models.base_llm import BaseLlm
    from google.adk.models.llm_response import LlmResponse

    steps = harness.model_steps()

    class ScriptedLlm(BaseLlm):
        """Replays `harness.model_steps()`; ignores the request except to size usage."""

        async def generate_content_async(
            self, llm_request: Any, stream: bool = False
        ) -> AsyncGenerator[Any, None]:
            step = next(steps)
            parts = [
                types.Part(
                    function_call=types.FunctionCall(
                        id=call.id, name=call.name, args=call.arguments
                    )
                )
                for call in step.tool_calls
            ]
            if step.text is not None:
                parts.append(types.Part(text=step.text))
            prompt_tokens = len(json.dumps(llm_request.model_dump(mode="json"))) // 4
            output_tokens = 12 * (len(step.tool_calls) or 1)
            yield LlmResponse(
                content=types.Content(role="model", parts=parts),
                finish_reason=types.FinishReason.STOP,
                usage_metadata=types.GenerateContentResponseUsageMetadata(
                    prompt_token_count=prompt_tokens,
                    candidates_token_count=output_tokens,
                    total_token_count=prompt_tokens + output_tokens,
                ),
                model_version=support.MODEL_NAME,
            )

    return ScriptedLlm(model=support.MODEL_NAME)


def tool_error_to_response(
    tool: Any, args: dict[str, Any], tool_context: Any, error: Exception
) -> dict[str, str]:
    """ADK's on_tool_error_callback: the failure goes back to the model as a response."""
    return {"error": str(error)}


async def run_turns() -> list[str | None]:
    from google.adk.agents import LlmAgent
    from google.adk.runners import InMemoryRunner
    from google.genai import types

    agent = LlmAgent(
        name=ADK_AGENT_NAME,
        model=build_model(types),
        instruction=harness.SYSTEM_PROMPT,
        description="Answers travel questions with the weather and flight tools.",
        tools=list(harness.TOOLS.values()),
        on_tool_error_callback=tool_error_to_response,
    )
    runner = InMemoryRunner(agent=agent, app_name=APP_NAME)
    await runner.session_service.create_session(
        app_name=APP_NAME, user_id=USER_ID, session_id=harness.CONVERSATION_ID
    )
    answers = []
    for turn in harness.TURNS:
        message = types.Content(role="user", parts=[types.Part(text=turn.query)])
        final = None
        async for event in runner.run_async(
            user_id=USER_ID, session_id=harness.CONVERSATION_ID, new_message=message
        ):
            if event.is_final_response() and event.content and event.content.parts:
                final = "".join(part.text or "" for part in event.content.parts)
        answers.append(final)
    await runner.close()
    return answers


def generate(scenario: str) -> Path:
    settings = harness.content_capture_env()
    settings.update(SCENARIO_ENV[scenario])
    os.environ.update(SCENARIO_ENV[scenario])
    # ADK's tracer and logger come from the OpenTelemetry globals: install ours first.
    capture = harness.Capture()
    settings["InMemoryRunner session_id"] = harness.CONVERSATION_ID
    settings["LlmAgent(on_tool_error_callback)"] = "returns {'error': str(exception)}"
    support.check_answers(scenario, asyncio.run(run_turns()))
    notes = [
        f"ADK agent names must be identifiers: the agent is named {ADK_AGENT_NAME!r}.",
        "Both turns run in one InMemorySessionService session whose id is the conversation "
        "id; ADK records it as gen_ai.conversation.id.",
        "The failing book_flight raises; ADK would abort the invocation, so the agent's "
        "on_tool_error_callback returns {'error': 'flight FL-404 is sold out'} as the function "
        "response; ADK marks that tool span ERROR with error.type=TOOL_ERROR (the message is "
        "only in the function response).",
        "Turn 1's parallel calls: ADK emits one execute_tool span per call plus an "
        "'execute_tool (merged)' span (gen_ai.tool.name='(merged tools)') for the merged "
        "response event; it is not a tool call.",
        "ADK wraps non-dict tool results as {'result': <value>} in the function response; the "
        "truth keeps the plain results.",
        "Token counts are a size estimate of the request made by the scripted model.",
    ]
    notes.extend(SCENARIO_NOTES.get(scenario, []))
    meta = support.meta(
        "google-adk",
        "google-adk-native",
        instrumentation_package="google-adk",
        settings=settings,
        agent_name=ADK_AGENT_NAME,
        notes=notes,
    )
    return capture.write(scenario, meta)


SCENARIOS = dict.fromkeys(SCENARIO_ENV, generate)

if __name__ == "__main__":
    raise SystemExit(support.run_cli(SCENARIOS, __doc__))
