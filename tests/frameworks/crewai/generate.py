"""CrewAI corpus: the shared scenario with OpenInference's CrewAI instrumentor.

Run inside the CrewAI environment (see requirements.txt):
`python generate.py crewai_openinference` (one scenario per process: the instrumentor
patches CrewAI globally).

Only the model is fake: a `crewai.llms.base_llm.BaseLLM` subclass that replays
`harness.model_steps()` through CrewAI's native function calling (it returns OpenAI-style
tool calls, two of them in turn 1's first step; CrewAI runs them in parallel threads) and
emits CrewAI's LLM call events as the built-in providers do. The agent is run standalone
with `Agent.kickoff(messages)`: CrewAI's way to hold a conversation is to pass the history,
so turn 2 gets turn 1's query and answer before its own query.

CrewAI's own telemetry is switched off (`CREWAI_DISABLE_TELEMETRY`, plus the tracing
opt-outs) so nothing tries the network; `OTEL_SDK_DISABLED` stays unset because it would
disable our tracer provider too.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import generator_support as support
import harness

SCENARIOS = ("crewai_openinference", "crewai_openinference_events", "crewai_openinference_crew")
OFFLINE_ENV = {
    "CREWAI_DISABLE_TELEMETRY": "true",
    "CREWAI_DISABLE_TRACKING": "true",
    "CREWAI_TRACING_ENABLED": "false",
}


def scripted_llm(steps: Iterator[harness.Step]) -> Any:
    from crewai.llms.base_llm import BaseLLM, llm_call_context
    from crewai.utilities.types import LLMMessage

    class ScriptedLLM(BaseLLM):
        """Replays the scenario; tool calls in the OpenAI chat-completions shape."""

        def call(
            self,
            messages: str | list[LLMMessage],
            tools: list[dict[str, Any]] | None = None,
            callbacks: list[Any] | None = None,
            available_functions: dict[str, Any] | None = None,
            from_task: Any = None,
            from_agent: Any = None,
            response_model: Any = None,
        ) -> Any:
            from crewai.events.types.llm_events import LLMCallType

            origin = {"from_task": from_task, "from_agent": from_agent}
            with llm_call_context():
                self._emit_call_started_event(
                    messages=messages,
                    tools=tools,
                    callbacks=callbacks,
                    available_functions=available_functions,
                    **origin,
                )
                step = next(steps)
                if step.tool_calls:
                    response: Any = support.openai_tool_calls(step)
                    call_type = LLMCallType.TOOL_CALL
                else:
                    response = step.text
                    call_type = LLMCallType.LLM_CALL
                self._emit_call_completed_event(
                    response=response,
                    call_type=call_type,
                    messages=messages,
                    finish_reason="tool_calls" if step.tool_calls else "stop",
                    **origin,
                )
                return response

        def supports_function_calling(self) -> bool:
            return True

        def get_context_window_size(self) -> int:
            return 128_000

    return ScriptedLLM(model=support.MODEL_NAME, provider="scripted")


def build_agent(llm: Any) -> Any:
    from crewai import Agent
    from crewai.tools import tool

    return Agent(
        role=harness.AGENT_NAME,
        goal="Answer travel questions with the tools.",
        backstory=harness.SYSTEM_PROMPT,
        tools=[tool(name)(fn) for name, fn in harness.TOOLS.items()],
        llm=llm,
        verbose=False,
        max_iter=10,
    )


def run_turns(agent: Any, *, session: bool) -> list[str]:
    from openinference.instrumentation import using_session

    history: list[dict[str, str]] = []
    answers = []
    for turn in harness.TURNS:
        messages = [*history, {"role": "user", "content": turn.query}]
        if session:
            with using_session(harness.CONVERSATION_ID):
                output = agent.kickoff(messages)
        else:
            output = agent.kickoff(messages)
        answers.append(str(output.raw))
        history += [
            {"role": "user", "content": turn.query},
            {"role": "assistant", "content": str(output.raw)},
        ]
    return answers


CREW_TASK = "Conversation so far:\n{history}\n\nThe traveller now asks: {query}"


def run_crew_turns(agent: Any) -> list[str]:
    """The same conversation as a one-task Crew kicked off once per turn.

    A Crew keeps nothing between kickoffs (its memory needs an embedder), so the
    conversation so far goes in as a task input, the usual way to chat with a crew.
    """
    from crewai import Crew, Task
    from openinference.instrumentation import using_session

    task = Task(
        description=CREW_TASK,
        expected_output="A short answer for the traveller.",
        agent=agent,
    )
    crew = Crew(agents=[agent], tasks=[task], verbose=False)
    history: list[str] = []
    answers = []
    for turn in harness.TURNS:
        inputs = {"history": "\n".join(history) or "(none)", "query": turn.query}
        with using_session(harness.CONVERSATION_ID):
            output = crew.kickoff(inputs=inputs)
        answers.append(str(output.raw))
        history += [f"Traveller: {turn.query}", f"Agent: {output.raw}"]
    return answers


def generate(scenario: str) -> Path:
    os.environ.pop("OTEL_SDK_DISABLED", None)
    os.environ.update(OFFLINE_ENV)
    settings = {**harness.content_capture_env(), **OFFLINE_ENV}
    capture = harness.Capture()
    from openinference.instrumentation.crewai import CrewAIInstrumentor

    events = scenario.endswith("_events")
    if events:
        support.instrument(capture, CrewAIInstrumentor, use_event_listener=True)
        settings["CrewAIInstrumentor.use_event_listener"] = "true"
    else:
        support.instrument(capture, CrewAIInstrumentor)
    settings["openinference.instrumentation.using_session"] = harness.CONVERSATION_ID
    agent = build_agent(scripted_llm(harness.model_steps()))
    if scenario.endswith("_crew"):
        answers = run_crew_turns(agent)
    else:
        answers = run_turns(agent, session=True)
    support.check_answers(scenario, answers)
    # Event handlers run on CrewAI's thread pool; with use_event_listener the last kickoff
    # span ends in one of them, possibly after kickoff returned: wait for them before writing.
    from crewai.events.event_bus import crewai_event_bus

    if not crewai_event_bus.flush():
        raise SystemExit(f"{scenario}: CrewAI's event handlers did not finish in time")
    meta = support.meta(
        "crewai",
        "openinference-instrumentation-crewai",
        settings=settings,
        notes=NOTES[scenario],
    )
    return capture.write(scenario, meta)


_MODEL_NOTE = (
    f"Model: a crewai BaseLLM subclass (model {support.MODEL_NAME!r}) with native function "
    "calling; it returns OpenAI-style tool-call dicts and emits CrewAI's LLM call events."
)
_STANDALONE_NOTE = (
    "Agent run standalone with Agent.kickoff(messages); the agent's role is the agent "
    "name. Turn 2's messages carry turn 1's query and answer (CrewAI has no session "
    "object for a standalone agent: the conversation is the history passed in)."
)
_CREW_NOTE = (
    "A one-agent, one-task Crew kicked off once per turn with inputs {history, query}; "
    f"the task description is {CREW_TASK!r}, so the model sees the query inside it. "
    "The agent's role is the agent name."
)
_COMMON_NOTES = [
    "Turn 1's two get_weather calls come from one model step; CrewAI's native tool loop "
    "runs them in parallel threads.",
    "Session id from openinference.instrumentation.using_session around each kickoff.",
    "CrewAI turns a raising tool into a result string "
    "('Error executing tool: ...'), which the model sees; the truth keeps the error.",
]
NOTES = {
    "crewai_openinference": [
        _MODEL_NOTE,
        _STANDALONE_NOTE,
        *_COMMON_NOTES,
        "Instrumentor in its default (wrapper) mode.",
    ],
    "crewai_openinference_crew": [
        _MODEL_NOTE,
        _CREW_NOTE,
        *_COMMON_NOTES,
        "Instrumentor in its default (wrapper) mode.",
    ],
    "crewai_openinference_events": [
        _MODEL_NOTE,
        _STANDALONE_NOTE,
        *_COMMON_NOTES,
        "Instrumentor with use_event_listener=True: spans built from CrewAI's event bus.",
    ],
}


if __name__ == "__main__":
    raise SystemExit(support.run_cli(dict.fromkeys(SCENARIOS, generate), __doc__))
