"""LangSmith corpus: a LangGraph agent whose tools come from a local MCP server through
`langchain-mcp-adapters`, traced by the `langsmith` SDK in OpenTelemetry mode.

    python generate.py --list
    python generate.py langsmith_otel_langgraph_mcp

The agent is LangGraph's prebuilt ReAct agent (as in `langgraph/`), with the
conversation id as `configurable.thread_id` and an in-memory checkpointer; its model is
the same scripted `GenericFakeChatModel` (`langgraph/generate.py`, only the LLM is
fake). The tools are the harness's three, served by `travel_mcp_server.py` (FastMCP over
stdio, started by `MultiServerMCPClient`): offline, a real MCP round trip per call. The
failing `book_flight("FL-404")` comes back from the server as `isError=True`, which
the adapters hand to the model as a ToolMessage with `status: "error"` (no span has an
error status: the flag inside the JSON is all there is).

Tracing is configured as a LangSmith user configures OTel export, through the
environment: `LANGSMITH_TRACING=true`, `LANGSMITH_OTEL_ENABLED=true`,
`LANGSMITH_OTEL_ONLY=true` (nothing sent to LangSmith's own API) and
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` pointing at a loopback OTLP/HTTP receiver in this
process (`otlp_sink.py`). The SDK builds its own tracer provider and exporter.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import sys
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import generator_support as support
import harness
import otlp_sink

HERE = Path(__file__).resolve().parent

FRAMEWORK = "langgraph"
MCP_SERVER = HERE / "travel_mcp_server.py"


def _langgraph_generator() -> Any:
    """`langgraph/generate.py` (its scripted chat model), loaded as a module."""
    spec = importlib.util.spec_from_file_location(
        "langgraph_generate", HERE.parent / "langgraph" / "generate.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


async def run_turns() -> list[str]:
    from langchain_mcp_adapters.client import MultiServerMCPClient
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.prebuilt import ToolNode, create_react_agent

    client = MultiServerMCPClient(
        {"travel": {"command": sys.executable, "args": [str(MCP_SERVER)], "transport": "stdio"}}
    )
    tools = await client.get_tools()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent's deprecation notice
        agent = create_react_agent(
            _langgraph_generator().scripted_model(),
            tools=ToolNode(tools, handle_tool_errors=True),
            prompt=harness.SYSTEM_PROMPT,
            name=harness.AGENT_NAME,
            checkpointer=InMemorySaver(),
        )
    config = {"configurable": {"thread_id": harness.CONVERSATION_ID}}
    answers = []
    for turn in harness.TURNS:
        state = await agent.ainvoke({"messages": [("user", turn.query)]}, config=config)
        answers.append(state["messages"][-1].content)
    return answers


def _openai_agents_truth() -> Any:
    """`openai_agents/generate.py`'s hand-off truth (`handoff_truth`, `BOOKING_AGENT`), loaded
    without the SDK: only its plain functions are used."""
    spec = importlib.util.spec_from_file_location(
        "openai_agents_generate", HERE.parent / "openai_agents" / "generate.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


BOOKING_AGENT = "booking-agent"
HANDOFF_TOOL = "transfer_to_booking-agent"  # langgraph-swarm names it after the agent as is


def swarm_steps() -> Any:
    """The script with the hand-off: turn 1 as usual, turn 2 opens with the travel agent's
    call of the swarm's hand-off tool, then the booking agent's steps."""
    first, second = harness.TURNS
    yield from first.steps
    yield harness.Step(tool_calls=(harness.ToolCall("call_h1", HANDOFF_TOOL, {}),))
    yield from second.steps


async def run_swarm_turns() -> list[str]:
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_mcp_adapters.client import MultiServerMCPClient
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.prebuilt import ToolNode, create_react_agent
    from langgraph_swarm import create_handoff_tool, create_swarm

    lg = _langgraph_generator()

    class SwarmModel(GenericFakeChatModel):
        model_name: str = "scripted-travel-model"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

    model = SwarmModel(messages=iter(lg._ai_message(s) for s in swarm_steps()))
    client = MultiServerMCPClient(
        {"travel": {"command": sys.executable, "args": [str(MCP_SERVER)], "transport": "stdio"}}
    )
    tools = {tool.name: tool for tool in await client.get_tools()}
    handoff = create_handoff_tool(agent_name=BOOKING_AGENT)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent's deprecation notice
        travel = create_react_agent(
            model,
            tools=ToolNode([tools["get_weather"], handoff], handle_tool_errors=True),
            prompt=harness.SYSTEM_PROMPT,
            name=harness.AGENT_NAME,
        )
        booking = create_react_agent(
            model,
            tools=ToolNode(
                [tools["search_flights"], tools["book_flight"]], handle_tool_errors=True
            ),
            prompt="You book flights. Use the tools.",
            name=BOOKING_AGENT,
        )
    swarm = create_swarm([travel, booking], default_active_agent=harness.AGENT_NAME).compile(
        checkpointer=InMemorySaver()
    )
    config = {"configurable": {"thread_id": harness.CONVERSATION_ID}}
    answers = []
    for turn in harness.TURNS:
        state = await swarm.ainvoke({"messages": [("user", turn.query)]}, config=config)
        answers.append(state["messages"][-1].content)
    return answers


def generate(scenario: str) -> Path:
    settings = {
        "LANGSMITH_TRACING": "true",
        "LANGSMITH_OTEL_ENABLED": "true",
        "LANGSMITH_OTEL_ONLY": "true",
        "LANGSMITH_API_KEY": "offline (never sent: OTel only)",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:PORT/v1/traces",
        "OTEL_SERVICE_NAME": harness.SERVICE_NAME,
        "session": "config={'configurable': {'thread_id': CONVERSATION_ID}}",
    }
    with otlp_sink.OtlpSink() as sink:
        os.environ.update(
            {
                "LANGSMITH_TRACING": "true",
                "LANGSMITH_OTEL_ENABLED": "true",
                "LANGSMITH_OTEL_ONLY": "true",
                "LANGSMITH_API_KEY": "offline",
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": sink.endpoint,
                "OTEL_SERVICE_NAME": harness.SERVICE_NAME,
            }
        )
        swarm = scenario.endswith("_swarm")
        answers = asyncio.run(run_swarm_turns() if swarm else run_turns())
        from langsmith.run_trees import get_cached_client
        from opentelemetry import trace

        get_cached_client().flush()
        provider: Any = trace.get_tracer_provider()
        provider.force_flush()
        provider.shutdown()
        requests = sink.requests(scenario)
    support.check_answers(scenario, answers)
    meta = support.meta(
        FRAMEWORK,
        "langsmith (OpenTelemetry export)",
        instrumentation_package="langsmith",
        settings=settings,
        notes=[
            "agent: langgraph.prebuilt.create_react_agent with ToolNode(mcp_tools, "
            "handle_tool_errors=True) and InMemorySaver; model: the scripted "
            "GenericFakeChatModel of langgraph/generate.py",
            "tools: the harness's three served by travel_mcp_server.py (FastMCP, stdio) "
            "through langchain-mcp-adapters' MultiServerMCPClient; the failing call comes "
            "back as CallToolResult(isError=True), a ToolMessage with status 'error'",
            "every span carries gen_ai.operation.name (chain, chat, execute_tool) and its "
            "content as JSON blobs in gen_ai.prompt / gen_ai.completion; the thread id is "
            "langsmith.metadata.thread_id",
        ],
    )
    if swarm:
        meta.notes.append(
            "two agents in a langgraph-swarm create_swarm: travel-agent (get_weather and "
            "the swarm's hand-off tool transfer_to_booking_agent) hands turn 2 to "
            "booking-agent (search_flights, book_flight); one scripted model serves both"
        )
    path = Path(otlp_sink.write_corpus(scenario, requests, meta))
    if swarm:
        expected = path.with_name(f"{scenario}.expected.json")
        truth = _openai_agents_truth().handoff_truth(json.loads(expected.read_text()))
        expected.write_text(json.dumps(truth, indent=2) + "\n")
    return path


SCENARIOS = {
    "langsmith_otel_langgraph_mcp": generate,
    "langsmith_otel_langgraph_mcp_swarm": generate,
}

if __name__ == "__main__":
    raise SystemExit(support.run_cli(SCENARIOS, __doc__))
