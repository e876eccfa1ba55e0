"""AutoGen AgentChat corpus: the shared scenario with AutoGen's own OpenTelemetry spans.

Run inside the AutoGen environment (see requirements.txt):
`python generate.py autogen_native` (AutoGen's own spans only) or
`autogen_openinference` (plus OpenInference's AgentChat instrumentor); one per process.

Only the model is fake: autogen-ext's `ReplayChatCompletionClient` replays
`harness.model_steps()` as `CreateResult`s (tool calls as `FunctionCall`s, two in turn 1's
first step, which `AssistantAgent` executes concurrently). The `AssistantAgent` runs the
harness tools through `FunctionTool` with `max_tool_iterations` high enough for turn 2's
three sequential tool steps; it keeps its model context between `run` calls, which is how
an AgentChat agent holds a conversation.

AutoGen's tracing is native: autogen-core opens `create_agent` / `invoke_agent` /
`execute_tool` spans with the global tracer provider (the harness installs it).
"""

from __future__ import annotations

import asyncio
import json
import sys
from contextlib import nullcontext
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import generator_support as support
import harness

SCENARIOS = ("autogen_native", "autogen_openinference")
AGENT = harness.AGENT_NAME.replace("-", "_")  # AgentChat names must be identifiers


def scripted_client() -> Any:
    from autogen_core import FunctionCall
    from autogen_core.models import CreateResult, ModelFamily, ModelInfo, RequestUsage
    from autogen_ext.models.replay import ReplayChatCompletionClient

    results: list[CreateResult | str] = []
    for step in harness.model_steps():
        if step.tool_calls:
            calls = [
                FunctionCall(id=c.id, name=c.name, arguments=json.dumps(c.arguments))
                for c in step.tool_calls
            ]
            results.append(
                CreateResult(
                    finish_reason="function_calls",
                    content=calls,
                    usage=RequestUsage(prompt_tokens=0, completion_tokens=0),
                    cached=False,
                )
            )
        else:
            assert step.text is not None
            results.append(step.text)
    info = ModelInfo(
        vision=False,
        function_calling=True,
        json_output=False,
        family=ModelFamily.UNKNOWN,
        structured_output=False,
    )
    return ReplayChatCompletionClient(results, model_info=info)


def build_agent(client: Any) -> Any:
    from autogen_agentchat.agents import AssistantAgent
    from autogen_core.tools import FunctionTool

    tools = [FunctionTool(fn, description=fn.__doc__ or name) for name, fn in harness.TOOLS.items()]
    return AssistantAgent(
        name=AGENT,
        description="Answers travel questions with tools.",
        system_message=harness.SYSTEM_PROMPT,
        model_client=client,
        tools=tools,
        max_tool_iterations=10,
    )


async def run_turns(agent: Any) -> list[str]:
    answers = []
    for turn in harness.TURNS:
        result = await agent.run(task=turn.query)
        answers.append(str(result.messages[-1].content))
    return answers


_COMMON_NOTES = [
    "Model: autogen_ext.models.replay.ReplayChatCompletionClient replaying the "
    "script (tool calls as FunctionCall, function_calling=True in its ModelInfo).",
    f"AssistantAgent names must be Python identifiers: the agent is {AGENT!r}.",
    "Turn 1's two get_weather calls come from one model step; AssistantAgent runs "
    "them concurrently (asyncio.gather).",
    "book_flight('FL-404') raises: AssistantAgent turns it into an is_error "
    "FunctionExecutionResult (content: the exception message) that the model sees.",
]
NATIVE_NOTES = [
    "AutoGen's native spans carry no content: no query, answer, tool arguments or "
    "results on any span (the content-capture variables have no effect on it); "
    "only agent and tool names, tool call ids and errors (exception on execute_tool).",
]


def generate(scenario: str) -> Path:
    settings = harness.content_capture_env()
    capture = harness.Capture()
    session: Any = nullcontext()
    if scenario == "autogen_openinference":
        from openinference.instrumentation import using_session
        from openinference.instrumentation.autogen_agentchat import (
            AutogenAgentChatInstrumentor,
        )

        support.instrument(capture, AutogenAgentChatInstrumentor)
        settings["openinference.instrumentation.using_session"] = harness.CONVERSATION_ID
        session = using_session(harness.CONVERSATION_ID)
    agent = build_agent(scripted_client())
    with session:
        answers = asyncio.run(run_turns(agent))
    support.check_answers(scenario, answers)
    if scenario == "autogen_openinference":
        meta = support.meta(
            "autogen-agentchat",
            "openinference-instrumentation-autogen-agentchat",
            settings=settings,
            agent_name=AGENT,
            notes=[
                *_COMMON_NOTES,
                "Both turns are run() calls on the same AssistantAgent (it keeps its model "
                "context); session id from openinference.instrumentation.using_session.",
                "OpenInference's LLM spans exist only for autogen-ext's OpenAI clients, so "
                "the replay client's calls have none.",
                "AutoGen's native spans (create_agent / invoke_agent / execute_tool) are "
                "in the same file: they go to the global provider whether or not "
                "OpenInference is installed.",
            ],
        )
    else:
        meta = support.meta(
            "autogen-agentchat",
            "autogen-core (native OpenTelemetry)",
            instrumentation_package="autogen-core",
            settings=settings,
            **support.per_turn_conversations(),
            agent_name=AGENT,
            notes=[
                *_COMMON_NOTES,
                "Both turns are run() calls on the same AssistantAgent (it keeps its model "
                "context), but AutoGen has no session id and each run is its own trace: "
                "conversations are per turn, ids derived from the traces.",
                *NATIVE_NOTES,
            ],
        )
    return capture.write(scenario, meta)


if __name__ == "__main__":
    raise SystemExit(support.run_cli(dict.fromkeys(SCENARIOS, generate), __doc__))
