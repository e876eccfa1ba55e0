"""LlamaIndex `FunctionAgent` corpus: the shared scenario with OpenInference's instrumentor.

Run inside the LlamaIndex environment (see requirements.txt):
`python generate.py llamaindex_openinference`.

Only the model is fake: LlamaIndex's own `MockFunctionCallingLLM` (a real
`FunctionCallingLLM`) gets a response generator that replays `harness.model_steps()`,
answering tool calls as `ToolCallBlock`s (two in the first step: LlamaIndex runs them as
parallel tool-call events). The agent workflow itself runs the harness tools through
`FunctionTool`; both turns share one workflow `Context`, so turn 2 sees turn 1's memory.
The session id comes from OpenInference's `using_session`, the documented way to put
`session.id` on the spans of a LlamaIndex run.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import generator_support as support
import harness

SCENARIOS = ("llamaindex_openinference",)


def scripted_llm(steps: Iterator[harness.Step]) -> Any:
    """LlamaIndex's mock function-calling LLM whose replies are the scenario's steps."""
    from llama_index.core.base.llms.types import (
        ChatMessage,
        LLMMetadata,
        MessageRole,
        TextBlock,
        ToolCallBlock,
    )
    from llama_index.core.llms.mock import MockFunctionCallingLLM

    def reply(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        step = next(steps)
        if step.tool_calls:
            blocks: list[Any] = [
                ToolCallBlock(tool_call_id=c.id, tool_name=c.name, tool_kwargs=dict(c.arguments))
                for c in step.tool_calls
            ]
        else:
            assert step.text is not None
            blocks = [TextBlock(text=step.text)]
        return ChatMessage(role=MessageRole.ASSISTANT, blocks=blocks)

    class ScriptedLLM(MockFunctionCallingLLM):
        """The core mock, but with a model name and the tools sent as JSON schemas.

        Why: the mock hands the tool objects themselves to the chat call (OpenInference
        then records their Python repr as `llm.tools`); a real function-calling
        integration sends the OpenAI-style schemas, which is what the corpus should show.
        """

        @property
        def metadata(self) -> LLMMetadata:
            return LLMMetadata(
                model_name=support.MODEL_NAME, is_function_calling_model=True, is_chat_model=True
            )

        def _prepare_chat_with_tools(
            self,
            tools: Sequence[Any],
            user_msg: Any = None,
            chat_history: Any = None,
            **kwargs: Any,
        ) -> dict[str, Any]:
            prepared = super()._prepare_chat_with_tools(
                tools, user_msg=user_msg, chat_history=chat_history, **kwargs
            )
            prepared["tools"] = [tool.metadata.to_openai_tool() for tool in tools]
            return prepared

    return ScriptedLLM(response_generator=reply, is_chat_model=True)


def build_agent(llm: Any) -> Any:
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.tools import FunctionTool

    tools = [FunctionTool.from_defaults(fn=fn) for fn in harness.TOOLS.values()]
    return FunctionAgent(
        name=harness.AGENT_NAME,
        description="Answers travel questions with tools.",
        system_prompt=harness.SYSTEM_PROMPT,
        tools=tools,
        llm=llm,
    )


async def run_turns(agent: Any) -> list[str]:
    from llama_index.core.workflow import Context
    from openinference.instrumentation import using_session

    ctx = Context(agent)
    answers = []
    with using_session(harness.CONVERSATION_ID):
        for turn in harness.TURNS:
            handler = agent.run(user_msg=turn.query, ctx=ctx)
            response = await handler
            answers.append(str(response))
    return answers


def generate(scenario: str) -> Path:
    settings = harness.content_capture_env()
    capture = harness.Capture()
    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

    support.instrument(capture, LlamaIndexInstrumentor)
    settings["openinference.instrumentation.using_session"] = harness.CONVERSATION_ID
    agent = build_agent(scripted_llm(harness.model_steps()))
    support.check_answers(scenario, asyncio.run(run_turns(agent)))
    meta = support.meta(
        "llama-index-core",
        "openinference-instrumentation-llama-index",
        settings=settings,
        notes=[
            "Model: a subclass of llama_index.core.llms.mock.MockFunctionCallingLLM "
            f"(model name {support.MODEL_NAME!r}) with a scripted response generator (tool calls "
            "as ToolCallBlock; tools sent as OpenAI-style schemas); FunctionAgent "
            "streams, so the LLM spans are astream_chat spans.",
            "Turn 1's two get_weather calls come from one model step; the agent workflow "
            "dispatches them as two concurrent tool-call events.",
            "Session id from openinference.instrumentation.using_session around both "
            "turns; both turns share one workflow Context (agent memory).",
            "book_flight('FL-404') raises: the agent workflow catches it and returns a "
            "ToolOutput with is_error=True whose content is the exception message.",
        ],
    )
    return capture.write(scenario, meta)


if __name__ == "__main__":
    raise SystemExit(support.run_cli(dict.fromkeys(SCENARIOS, generate), __doc__))
