"""LangGraph corpus: the shared travel scenario under three LangChain instrumentations.

    python generate.py --list
    python generate.py langgraph_openinference [langgraph_openllmetry ...]

`langgraph_otel_genai_events` is the official instrumentation with message content in
OTLP log records only (`EVENT_ONLY`), the stress case for reading GenAI events from logs.

Two agents, both compiled LangGraph graphs with an in-memory checkpointer and the
conversation id as `configurable.thread_id` (how LangGraph users keep a multi-turn
thread): LangGraph's prebuilt ReAct agent (`create_react_agent`, deprecated in 1.x) with
a `ToolNode(handle_tool_errors=True)` (the default handler re-raises tool exceptions and
would end the run), and, in the `*_create_agent` scenarios, its successor
`langchain.agents.create_agent` with a `ToolErrorMiddleware` doing the same. Every instrumentation reads the thread id from the run metadata LangGraph fills
from `configurable`, so no instrumentation-specific session API is needed.

The model is langchain-core's `GenericFakeChatModel` replaying `harness.model_steps()`
as `AIMessage`s with `tool_calls`; `bind_tools` returns the model itself because the
script already knows which tools it calls. Runs inside the venv built from
`requirements.txt` (see `tests/frameworks/regenerate.py`).
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import generator_support as support
import harness

FRAMEWORK = "langgraph"
COMMON_NOTES = [
    "session: config={'configurable': {'thread_id': CONVERSATION_ID}}",
    "LangChain stringifies non-string tool results for the ToolMessage (search_flights' list "
    "and book_flight's dict travel as JSON text); the truth keeps the plain results",
]


def _ai_message(step: harness.Step) -> Any:
    """The step as a chat model's reply, with the response metadata real providers set."""
    from langchain_core.messages import AIMessage

    finish_reason = "tool_calls" if step.tool_calls else "stop"
    return AIMessage(
        content=step.text or "",
        response_metadata={"finish_reason": finish_reason, "model_name": support.MODEL_NAME},
        tool_calls=[
            {"name": call.name, "args": call.arguments, "id": call.id, "type": "tool_call"}
            for call in step.tool_calls
        ],
    )


def scripted_model() -> Any:
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

    class ScriptedChatModel(GenericFakeChatModel):
        """Replays the scenario; the bound tools change nothing, the script knows them.

        `model_name` is what real chat models report in their invocation parameters; the
        OpenTelemetry GenAI instrumentation records no chat span for a model without one.
        """

        model_name: str = support.MODEL_NAME

        def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
            return self

    return ScriptedChatModel(messages=iter(_ai_message(s) for s in harness.model_steps()))


def tools() -> list[Any]:
    from langchain_core.tools import StructuredTool

    return [StructuredTool.from_function(function) for function in harness.TOOLS.values()]


def react_agent() -> Any:
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.prebuilt import ToolNode, create_react_agent

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent's deprecation notice
        return create_react_agent(
            scripted_model(),
            tools=ToolNode(tools(), handle_tool_errors=True),
            prompt=harness.SYSTEM_PROMPT,
            name=harness.AGENT_NAME,
            checkpointer=InMemorySaver(),
        )


def _tool_error_content(error: Exception, request: Any) -> str:
    return f"Error: {error}"


def create_agent() -> Any:
    from langchain.agents import create_agent as create
    from langchain.agents.middleware import ToolErrorMiddleware
    from langgraph.checkpoint.memory import InMemorySaver

    return create(
        scripted_model(),
        tools=tools(),
        system_prompt=harness.SYSTEM_PROMPT,
        middleware=[ToolErrorMiddleware(_tool_error_content)],
        name=harness.AGENT_NAME,
        checkpointer=InMemorySaver(),
    )


@dataclass(frozen=True)
class Agent:
    build: Callable[[], Any]
    notes: tuple[str, ...]


REACT = Agent(
    react_agent,
    (
        "agent: langgraph.prebuilt.create_react_agent (deprecated in LangGraph 1.x for "
        "langchain.agents.create_agent) with ToolNode(handle_tool_errors=True) and InMemorySaver",
        "the failing book_flight call goes back to the model as a ToolMessage with status "
        "'error' and the content \"Error: ToolFailure('flight FL-404 is sold out')\\n Please "
        'fix your mistakes."; the truth keeps the exception message',
    ),
)
CREATE_AGENT = Agent(
    create_agent,
    (
        "agent: langchain.agents.create_agent (LangGraph 1.x's prebuilt agent, in langchain) "
        "with middleware=[ToolErrorMiddleware(on_error)] and InMemorySaver",
        "the failing book_flight call goes back to the model as a ToolMessage with status "
        "'error' and the content 'Error: flight FL-404 is sold out'",
    ),
)


def run_turns(agent_kind: Agent) -> list[str]:
    agent = agent_kind.build()
    config = {"configurable": {"thread_id": harness.CONVERSATION_ID}}
    return [
        agent.invoke({"messages": [("user", turn.query)]}, config=config)["messages"][-1].content
        for turn in harness.TURNS
    ]


def _generate(
    scenario: str,
    agent: Agent,
    *,
    install: support.Installer,
    instrumentation: str,
    settings: dict[str, str],
    distribution: str | None = None,
    notes: Sequence[str] = (),
) -> Path:
    capture = support.run_instrumented(scenario, install, partial(run_turns, agent))
    meta = support.meta(
        FRAMEWORK,
        instrumentation,
        instrumentation_package=distribution,
        settings=settings,
        notes=[*agent.notes, *COMMON_NOTES, *notes],
    )
    return capture.write(scenario, meta)


def openinference(scenario: str, agent: Agent) -> Path:
    from openinference.instrumentation.langchain import LangChainInstrumentor

    return _generate(
        scenario,
        agent,
        install=support.installer(LangChainInstrumentor),
        instrumentation="openinference-instrumentation-langchain",
        settings=harness.content_capture_env(),
        notes=[
            "OpenInference reads session.id from the run metadata key thread_id (also "
            "session_id / conversation_id); openinference.instrumentation.using_session is "
            "not needed and not used",
        ],
    )


def openllmetry(scenario: str, agent: Agent) -> Path:
    from opentelemetry.instrumentation.langchain import LangchainInstrumentor

    return _generate(
        scenario,
        agent,
        install=support.installer(LangchainInstrumentor),
        instrumentation="opentelemetry-instrumentation-langchain (OpenLLMetry, traceloop)",
        distribution="opentelemetry-instrumentation-langchain",
        settings={**harness.content_capture_env(), "LangchainInstrumentor": "defaults"},
    )


#: The official OpenTelemetry GenAI instrumentation reads the capture mode as an enum
#: name; harness.content_capture_env()'s "true" is not one and would capture nothing.
CAPTURE_MODE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
OTEL_GENAI_NOTES = [
    "the official OpenTelemetry LangChain instrumentation is published as "
    "opentelemetry-instrumentation-genai-langchain (module "
    "opentelemetry.instrumentation.genai.langchain); the PyPI name "
    "opentelemetry-instrumentation-langchain is OpenLLMetry's",
    f"{CAPTURE_MODE} takes NO_CONTENT | SPAN_ONLY | EVENT_ONLY | SPAN_AND_EVENT here; "
    "'true' means no content",
]
EVENT_ONLY_NOTES = [
    "EVENT_ONLY: message content is only in gen_ai.client.inference.operation.details log "
    "records (one per chat call, joined to its span by trace/span id); tool spans carry no "
    "arguments and no results, so arguments can only come from the model's tool-call "
    "requests in those log records, and tool results from the next call's input messages",
]


def otel_genai(
    scenario: str, agent: Agent, capture_mode: str = "SPAN_ONLY", notes: Sequence[str] = ()
) -> Path:
    harness.content_capture_env()
    os.environ[CAPTURE_MODE] = capture_mode
    from opentelemetry.instrumentation.genai.langchain import LangChainInstrumentor

    return _generate(
        scenario,
        agent,
        install=support.installer(LangChainInstrumentor, logs=True),
        instrumentation="opentelemetry-instrumentation-genai-langchain (OpenTelemetry GenAI)",
        distribution="opentelemetry-instrumentation-genai-langchain",
        settings={CAPTURE_MODE: capture_mode},
        notes=[*OTEL_GENAI_NOTES, *notes],
    )


SCENARIOS: dict[str, support.Generator] = {
    "langgraph_openinference": partial(openinference, agent=REACT),
    "langgraph_openllmetry": partial(openllmetry, agent=REACT),
    "langgraph_otel_genai": partial(otel_genai, agent=REACT),
    "langgraph_otel_genai_events": partial(
        otel_genai, agent=REACT, capture_mode="EVENT_ONLY", notes=EVENT_ONLY_NOTES
    ),
    "langgraph_openinference_create_agent": partial(openinference, agent=CREATE_AGENT),
    "langgraph_openllmetry_create_agent": partial(openllmetry, agent=CREATE_AGENT),
    "langgraph_otel_genai_create_agent": partial(otel_genai, agent=CREATE_AGENT),
}

if __name__ == "__main__":
    raise SystemExit(support.run_cli(SCENARIOS, __doc__))
