"""Held-out corpus: a plain LangChain tool loop (no LangGraph, no agent class).

Run inside the langchain_loop environment (see requirements.txt):
`python generate.py heldout_langchain_loop_openinference` (or another name of `--list`).

Held out: the LangChain corpora elsewhere are LangGraph graphs; this is the loop the
LangChain docs show without one, so no graph root CHAIN and no agent span exists. It
tests the conventions alone (issue 10: "held-out traces from frameworks and settings not
named here are recovered wherever their spans carry the data").

`ChatOpenAI(...).bind_tools([...])` over the three harness functions as `@tool`s; the
application invokes the model, runs each requested call with `tool.invoke(tool_call)`
(a `ToolMessage` back; the loop turns a raised `ToolFailure` into an error
`ToolMessage` itself), and invokes again until the reply has no tool calls. Both turns
share one message list. Only the model is fake: LangChain's real `ChatOpenAI` whose OpenAI
client talks to an in-process `httpx.MockTransport` (two tool calls in turn 1's first
step). Each turn is wrapped in a plain application span `travel-agent turn` with
`session.id` (nothing in a plain loop carries a session).

Scenarios (one instrumentation per process):

* `heldout_langchain_loop_openinference` — `openinference-instrumentation-langchain`.
* `heldout_langchain_loop_openllmetry` — OpenLLMetry `opentelemetry-instrumentation-langchain`
  (`TRACELOOP_TRACE_CONTENT=true`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import generator_support as support
import harness

SCENARIOS = ("heldout_langchain_loop_openinference", "heldout_langchain_loop_openllmetry")
TURN_SPAN = f"{harness.AGENT_NAME} turn"


def lc_tools() -> list[Any]:
    from langchain_core.tools import tool

    return [tool(f) for f in harness.TOOLS.values()]


def run_call(tools: dict[str, Any], call: dict[str, Any]) -> Any:
    """`tool.invoke(tool_call)` (a `ToolMessage`); a raised tool error becomes an error
    `ToolMessage` with the exception text, as the LangChain docs' loops do."""
    from langchain_core.messages import ToolMessage

    try:
        return tools[call["name"]].invoke(call)
    except harness.ToolFailure as exc:
        return ToolMessage(str(exc), tool_call_id=call["id"], status="error")


def scripted_transport() -> Any:
    """`support.chat_completions_transport`, but with non-zero token usage: OpenLLMetry's
    LangChain callback reads zero counts as missing (`0 or None`) and then fails adding
    them (`None + None`), so with the shared zero usage it ends no model span at all."""
    import httpx

    steps = enumerate(harness.model_steps())

    def respond(request: httpx.Request) -> httpx.Response:
        if request.method != "POST" or not request.url.path.endswith("/chat/completions"):
            return httpx.Response(404, json={"error": {"message": f"unscripted {request.url}"}})
        index, step = next(steps)
        body = support.chat_completion_body(step, index, support.MODEL_NAME)
        body["usage"] = {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60}
        return httpx.Response(200, json=body)

    return httpx.MockTransport(respond)


def run_turns() -> list[str | None]:
    import httpx
    from langchain_core.messages import HumanMessage, SystemMessage
    from langchain_openai import ChatOpenAI
    from opentelemetry import trace

    tools = {t.name: t for t in lc_tools()}
    model = ChatOpenAI(
        model=support.MODEL_NAME,
        api_key="scripted",
        base_url="http://scripted-model.invalid/v1",
        http_client=httpx.Client(transport=scripted_transport()),
    ).bind_tools(list(tools.values()))
    tracer = trace.get_tracer("travel-agent-app")
    messages: list[Any] = [SystemMessage(harness.SYSTEM_PROMPT)]
    answers: list[str | None] = []
    for turn in harness.TURNS:
        with tracer.start_as_current_span(
            TURN_SPAN, attributes={"session.id": harness.CONVERSATION_ID}
        ):
            messages.append(HumanMessage(turn.query))
            while True:
                reply = model.invoke(messages)
                messages.append(reply)
                if not reply.tool_calls:
                    answers.append(reply.text)
                    break
                for call in reply.tool_calls:
                    messages.append(run_call(tools, call))
    return answers


def generate(scenario: str) -> Path:
    settings = harness.content_capture_env()
    settings["turn span attribute session.id"] = harness.CONVERSATION_ID
    if scenario.endswith("_openinference"):
        from openinference.instrumentation.langchain import LangChainInstrumentor

        instrumentation = "openinference-instrumentation-langchain"
    else:
        from opentelemetry.instrumentation.langchain import (  # type: ignore[no-redef]
            LangchainInstrumentor as LangChainInstrumentor,
        )

        instrumentation = "opentelemetry-instrumentation-langchain"
    capture = support.run_instrumented(
        scenario, support.installer(LangChainInstrumentor), run_turns
    )
    meta = support.meta(
        "langchain-core",
        instrumentation,
        settings=settings,
        agent_name=None,
        notes=[
            "No agent class and no LangGraph: ChatOpenAI.bind_tools and a hand-written loop "
            "(tool.invoke(tool_call) per requested call); the real ChatOpenAI talks to an "
            "in-process httpx.MockTransport.",
            f"Each turn is wrapped in a plain application span {TURN_SPAN!r} with session.id.",
            "The loop turns the failing tool's exception into an error ToolMessage (its text, "
            "status error); the truth keeps the plain results.",
        ],
    )
    return capture.write(scenario, meta)


if __name__ == "__main__":
    raise SystemExit(support.run_cli(dict.fromkeys(SCENARIOS, generate), __doc__))
