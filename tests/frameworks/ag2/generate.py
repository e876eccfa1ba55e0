"""AG2 corpus: AG2's classic two-agent tool loop (`ConversableAgent` assistant +
executor) with a scripted model client, traced by OpenInference's AG2 instrumentation.

    python generate.py --list
    python generate.py ag2_openinference

The assistant's model is a custom AG2 model client (`register_model_client`) replaying
the script as OpenAI-shaped chat messages (tool calls with the script's ids); the
executor agent runs the three harness functions registered with `register_function`
(AG2 catches the failing `book_flight` and returns `Error: …` to the model). Each turn is
one `executor.initiate_chat(assistant, message=query)` (history kept for turn 2), ending
when the assistant answers in text. Both turns run inside `using_session`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import generator_support as support
import harness

FRAMEWORK = "ag2"


class ScriptedClient:
    """An AG2 model client (the `ModelClient` protocol) replaying the script."""

    steps = harness.model_steps()

    def __init__(self, config: dict[str, Any], **kwargs: Any) -> None:
        self.model = config["model"]

    def create(self, params: dict[str, Any]) -> Any:
        step = next(self.steps)
        calls = support.openai_tool_calls(step)
        message = SimpleNamespace(
            role="assistant",
            content=step.text,
            tool_calls=[
                SimpleNamespace(
                    id=c["id"],
                    type="function",
                    function=SimpleNamespace(**c["function"]),
                )
                for c in calls
            ]
            or None,
            function_call=None,
        )
        self.count = getattr(self, "count", 0) + 1
        return SimpleNamespace(
            id=f"scripted-{id(self)}-{self.count}",
            model=self.model,
            choices=[SimpleNamespace(message=message, finish_reason="stop")],
            cost=0.0,
            usage=SimpleNamespace(prompt_tokens=0, completion_tokens=0, total_tokens=0),
        )

    def message_retrieval(self, response: Any) -> list[Any]:
        out = []
        for choice in response.choices:
            message = choice.message
            if message.tool_calls:
                out.append(
                    {
                        "role": "assistant",
                        "content": message.content,
                        "tool_calls": [
                            {
                                "id": c.id,
                                "type": "function",
                                "function": {
                                    "name": c.function.name,
                                    "arguments": c.function.arguments,
                                },
                            }
                            for c in message.tool_calls
                        ],
                    }
                )
            else:
                out.append(message.content)
        return out

    def cost(self, response: Any) -> float:
        return 0.0

    @staticmethod
    def get_usage(response: Any) -> dict[str, Any]:
        return {
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "total_tokens": 0,
            "cost": 0.0,
            "model": response.model,
        }


def run() -> list[str | None]:
    from autogen import ConversableAgent, register_function
    from openinference.instrumentation import using_session

    assistant = ConversableAgent(
        name=harness.AGENT_NAME.replace("-", "_"),
        system_message=harness.SYSTEM_PROMPT,
        llm_config={
            "config_list": [{"model": support.MODEL_NAME, "model_client_cls": "ScriptedClient"}],
            "cache_seed": None,  # no disk cache: every request reaches the script
        },
        human_input_mode="NEVER",
    )
    executor = ConversableAgent(
        name="executor",
        llm_config=False,
        human_input_mode="NEVER",
        is_termination_msg=lambda message: not message.get("tool_calls"),
    )
    for name, function in harness.TOOLS.items():
        register_function(
            function,
            caller=assistant,
            executor=executor,
            name=name,
            description=function.__doc__ or name,
        )
    # After the tools: registering a tool rebuilds the assistant's model clients.
    assistant.register_model_client(model_client_cls=ScriptedClient)
    answers: list[str | None] = []
    with using_session(harness.CONVERSATION_ID):
        for index, turn in enumerate(harness.TURNS):
            result = executor.initiate_chat(
                assistant,
                message=turn.query,
                clear_history=index == 0,
                summary_method="last_msg",
                silent=True,
            )
            answers.append(result.summary)
    return answers


def generate(scenario: str) -> Path:
    from openinference.instrumentation.ag2 import AG2Instrumentor

    capture = support.run_instrumented(scenario, support.installer(AG2Instrumentor), run)
    meta = support.meta(
        FRAMEWORK,
        "openinference-instrumentation-ag2",
        settings={"using_session": harness.CONVERSATION_ID},
        agent_name=None,
        notes=["The assistant's model is a custom AG2 model client replaying the script."],
    )
    return capture.write(scenario, meta)


SCENARIOS = {"ag2_openinference": generate}

if __name__ == "__main__":
    raise SystemExit(support.run_cli(SCENARIOS, __doc__))
