"""Agno corpus: the shared scenario with an Agno `Agent` and OpenInference.

Run inside the Agno environment (see requirements.txt):
`python generate.py agno_openinference`.

Only the model is fake: Agno's own `OpenAIChat` model, whose OpenAI client is given an
`httpx.MockTransport` that answers each chat-completions request with the next of
`harness.model_steps()` (tool calls in the API's shape, two in turn 1's first step). The agent runs with `arun`, where Agno executes one step's tool calls
concurrently. Multi-turn is Agno's own: both runs share `session_id=CONVERSATION_ID` in an
in-memory session store with `add_history_to_context=True`, and OpenInference copies that
session id onto the spans.

Why not a custom `agno.models.base.Model` subclass: the instrumentor wraps only the model
classes it finds under `agno.models.*`, so such a model would get no LLM spans.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import generator_support as support
import harness

SCENARIOS = ("agno_openinference",)


def scripted_model() -> Any:
    """Agno's own `OpenAIChat`, its OpenAI client talking to an in-process fake endpoint.

    Why not a custom `Model` subclass: OpenInference's Agno instrumentor wraps only the
    model classes found under `agno.models.*`, so a user-defined model gets no LLM spans;
    faking the HTTP endpoint keeps Agno's real model class (and its spans).
    """
    import httpx
    from agno.models.openai import OpenAIChat

    return OpenAIChat(
        id=support.MODEL_NAME,
        api_key="scripted",
        base_url="http://scripted-model.invalid/v1",
        http_client=httpx.AsyncClient(
            transport=support.chat_completions_transport(support.MODEL_NAME)
        ),
    )


def build_agent(model: Any) -> Any:
    from agno.agent import Agent
    from agno.db.in_memory import InMemoryDb

    return Agent(
        name=harness.AGENT_NAME,
        model=model,
        instructions=harness.SYSTEM_PROMPT,
        tools=list(harness.TOOLS.values()),
        db=InMemoryDb(),
        add_history_to_context=True,
        telemetry=False,
    )


async def run_turns(agent: Any) -> list[str]:
    answers = []
    for turn in harness.TURNS:
        output = await agent.arun(turn.query, session_id=harness.CONVERSATION_ID)
        answers.append(str(output.content))
    return answers


def generate(scenario: str) -> Path:
    settings = {**harness.content_capture_env(), "AGNO_TELEMETRY": "false"}
    import os

    os.environ["AGNO_TELEMETRY"] = "false"
    capture = harness.Capture()
    from openinference.instrumentation.agno import AgnoInstrumentor

    support.instrument(capture, AgnoInstrumentor)
    settings["agno.Agent.arun(session_id)"] = harness.CONVERSATION_ID
    agent = build_agent(scripted_model())
    support.check_answers(scenario, asyncio.run(run_turns(agent)))
    meta = support.meta(
        "agno",
        "openinference-instrumentation-agno",
        settings=settings,
        notes=[
            f"Model: agno's OpenAIChat (id {support.MODEL_NAME!r}) whose OpenAI client talks to an "
            "in-process httpx.MockTransport replaying the script as chat-completions "
            "responses (a custom agno Model subclass gets no LLM spans from OpenInference).",
            "Both turns are Agent.arun calls with session_id=conv-travel-1 (InMemoryDb, "
            "add_history_to_context=True): Agno's own session.",
            "Turn 1's two get_weather calls come from one model step; in arun Agno "
            "executes them concurrently (asyncio.gather).",
            "Agno stringifies tool results for the model; the truth keeps the plain results.",
        ],
    )
    return capture.write(scenario, meta)


if __name__ == "__main__":
    raise SystemExit(support.run_cli(dict.fromkeys(SCENARIOS, generate), __doc__))
