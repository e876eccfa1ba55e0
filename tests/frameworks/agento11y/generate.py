"""Grafana agento11y corpus: the shared travel scenario, a LangGraph ReAct agent recorded by
agento11y's LangGraph callback handler in its three capture setups, and an OpenAI Agents
agent recorded by agento11y's OpenAI Agents run hooks.

    python generate.py --list
    python generate.py agento11y_langgraph [agento11y_langgraph_full agento11y_langgraph_otel]
    python generate.py agento11y_openai_agents_otel [agento11y_openai_agents_otel_handoff]

The agent is the LangGraph corpus's `create_react_agent` (same scripted chat model, same
tools, loaded from `../langgraph/generate.py`), run twice in one thread with
`Agento11yLangGraphHandler(client=..., agent_name=..., conversation_id=...)` as the
callback; the `agento11y.Client` gets the harness's tracer provider. Generations that
agento11y sends to Grafana's own ingest (its default `grpc` protocol) go to the SDK's
`NoopGenerationExporter` (no network); with `protocol="otel"` they are OTel spans.

The OpenAI Agents agent is the OpenAI Agents corpus's (`../openai_agents/generate.py`: the
SDK's own `OpenAIResponsesModel` on a client whose HTTP transport answers with the script,
`function_tool`s, `SQLiteSession`), run with `hooks=create_agento11y_openai_agents_hooks(
client=..., agent_name=...)` and the conversation id in the run context
(`context={"conversation_id": ...}`, which the hooks read into their metadata).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import generator_support as support
import harness

FRAMEWORK = "agento11y"
OTEL_SWITCH = "AGENTO11Y_ENABLE_EXPERIMENTAL_FEATURES"
NOTES = [
    "every span is the root of its own trace; runs are linked by "
    "agento11y.framework.run_id / parent_run_id (tool spans carry none)",
    "grpc/http protocol: messages go to the generation ingest, not to spans: no span carries "
    "the query, the answer or the model's tool-call requests; the failing tool's span "
    "carries no arguments",
]


def _langgraph_generator() -> Any:
    return _corpus_generator("langgraph")


def _corpus_generator(framework: str) -> Any:
    """Another framework's corpus generator, loaded by path (its agent is reused)."""
    path = Path(__file__).resolve().parent.parent / framework / "generate.py"
    spec = importlib.util.spec_from_file_location(f"{framework}_corpus_generator", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _client(capture: harness.Capture, mode: str) -> Any:
    from agento11y import Client
    from agento11y.config import ClientConfig, GenerationExportConfig
    from agento11y.exporters.noop import NoopGenerationExporter
    from agento11y.models import ContentCaptureMode

    if mode == "otel":
        # `protocol="otel"` is an experimental feature of the SDK, switched on by env.
        os.environ[OTEL_SWITCH] = "true"
        return Client(
            ClientConfig(
                generation_export=GenerationExportConfig(protocol="otel"),
                tracer_provider=capture.tracer_provider,
                meter_provider=None,
                content_capture=ContentCaptureMode.FULL,
            )
        )
    return Client(
        ClientConfig(
            tracer_provider=capture.tracer_provider,
            generation_exporter=NoopGenerationExporter(),
            content_capture=ContentCaptureMode.FULL if mode == "full" else None,
        )
    )


def generate(scenario: str) -> Path:
    from agento11y_langgraph import Agento11yLangGraphHandler

    mode = {"agento11y_langgraph": "default", "agento11y_langgraph_full": "full"}.get(
        scenario, "otel"
    )
    langgraph = _langgraph_generator()
    capture = harness.Capture()
    client = _client(capture, mode)
    handler = Agento11yLangGraphHandler(
        client=client,
        agent_name=harness.AGENT_NAME,
        conversation_id=harness.CONVERSATION_ID,
    )
    agent = langgraph.REACT.build()
    config = {"configurable": {"thread_id": harness.CONVERSATION_ID}, "callbacks": [handler]}
    answers = [
        agent.invoke({"messages": [("user", turn.query)]}, config=config)["messages"][-1].content
        for turn in harness.TURNS
    ]
    client.shutdown()
    support.check_answers(scenario, answers)
    settings = {
        "default": {"protocol": "grpc (default; generations to NoopGenerationExporter)"},
        "full": {
            "protocol": "grpc (default; generations to NoopGenerationExporter)",
            "content_capture": "ContentCaptureMode.FULL",
        },
        "otel": {
            "protocol": "otel",
            "content_capture": "ContentCaptureMode.FULL",
            OTEL_SWITCH: "true",
        },
    }[mode]
    meta = support.meta(
        FRAMEWORK,
        "agento11y-langgraph",
        framework_package="agento11y",
        settings=settings,
        notes=NOTES if mode != "otel" else NOTES[:1],
    )
    return capture.write(scenario, meta)


OPENAI_AGENTS_NOTES = [
    "the run hooks read a tool's input from ToolContext.tool_input, which openai-agents sets "
    "only for agents used as tools; a function tool's arguments (ToolContext.tool_arguments) "
    "and call id are not recorded, and the model spans keep only text: no span carries a "
    "call's arguments",
    "openai-agents hands a failing tool's error to the model as the tool's result (here the "
    "failure_error_function's 'Error: ...'); the hooks record it as a successful result",
    "model name: str() of the agent's Model object (the agent was given a Model, not a name)",
]


OPENAI_AGENTS_HANDOFF_NOTES = [
    "two agents (the OpenAI Agents corpus's hand-off run: travel-agent hands turn 2 to "
    "booking-agent; model: its custom agents.Model replaying the script with the hand-off "
    "call): the hooks' agent_handoff span (run_type=handoff) names no destination and has "
    "no parent run id, and every span names the hooks' agent_name",
]


def generate_openai_agents(scenario: str) -> Path:
    import asyncio

    from agento11y_openai_agents import create_agento11y_openai_agents_hooks
    from agents import RunConfig, Runner, set_trace_processors
    from agents.memory.sqlite_session import SQLiteSession

    openai_agents = _corpus_generator("openai_agents")
    set_trace_processors([])  # no upload to OpenAI: agento11y records through its hooks
    capture = harness.Capture()
    client = _client(capture, "otel")

    handoff = scenario.endswith("_handoff")

    async def run() -> list[str]:
        if handoff:
            model = openai_agents.scripted_model(openai_agents.handoff_steps())
            agent = openai_agents.build_handoff_agent(model)
        else:
            agent = openai_agents.build_agent(openai_agents.scripted_responses_model())
        session = SQLiteSession(harness.CONVERSATION_ID)
        config = RunConfig(group_id=harness.CONVERSATION_ID, workflow_name="travel-workflow")
        hooks = create_agento11y_openai_agents_hooks(client=client, agent_name=harness.AGENT_NAME)
        answers = []
        for turn in harness.TURNS:
            result = await Runner.run(
                agent,
                turn.query,
                session=session,
                run_config=config,
                hooks=hooks,
                context={"conversation_id": harness.CONVERSATION_ID},
            )
            answers.append(result.final_output)
        return answers

    answers = asyncio.run(run())
    client.shutdown()
    support.check_answers(scenario, answers)
    meta = support.meta(
        FRAMEWORK,
        "agento11y-openai-agents",
        framework_package="agento11y",
        settings={
            "protocol": "otel",
            "content_capture": "ContentCaptureMode.FULL",
            OTEL_SWITCH: "true",
            "hooks": "create_agento11y_openai_agents_hooks(client=..., agent_name=...)",
            "run_context": "{'conversation_id': CONVERSATION_ID}",
            "openai_agents_version": harness.package_version("openai-agents"),
        },
        notes=OPENAI_AGENTS_NOTES + (OPENAI_AGENTS_HANDOFF_NOTES if handoff else []),
    )
    path = capture.write(scenario, meta)
    if handoff:
        expected = path.with_name(f"{scenario}.expected.json")
        truth = openai_agents.handoff_truth(json.loads(expected.read_text()))
        expected.write_text(json.dumps(truth, indent=2) + "\n")
    return path


SCENARIOS = {
    "agento11y_openai_agents_otel": generate_openai_agents,
    "agento11y_openai_agents_otel_handoff": generate_openai_agents,
    "agento11y_langgraph": generate,
    "agento11y_langgraph_full": generate,
    "agento11y_langgraph_otel": generate,
}

if __name__ == "__main__":
    raise SystemExit(support.run_cli(SCENARIOS, __doc__))
