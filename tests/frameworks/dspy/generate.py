"""Held-out corpus: DSPy `ReAct` with tools, traced by OpenInference.

Run inside the dspy environment (see requirements.txt):
`python generate.py heldout_dspy_openinference`.

Held out: tracepass has no DSPy adapter; this tests the OpenInference convention alone
(issue 10: "held-out traces from frameworks and settings not named here are recovered
wherever their spans carry the data").

`dspy.ReAct("question -> answer", tools=[...])` over the three harness functions. Only
the model is fake: DSPy's own scripted LM, `dspy.utils.DummyLM`, replays the script as
ReAct's output fields (`next_thought`, `next_tool_name`, `next_tool_args`; then `finish`;
then the extract step's `reasoning` and `answer`), formatted by DSPy's real `ChatAdapter`
and parsed back by it. ReAct runs the tools itself.

ReAct picks ONE tool per step: turn 1's two parallel `get_weather` calls become two
consecutive steps (the truth, which lists calls, is the same). Each turn is one ReAct
call; DSPy has no session, so both run inside OpenInference's `using_session`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import generator_support as support
import harness

SCENARIOS = ("heldout_dspy_openinference",)


def scripted_outputs() -> list[dict[str, Any]]:
    """The script as DSPy ReAct output fields, one dict per LM call."""
    out: list[dict[str, Any]] = []
    for turn in harness.TURNS:
        for step in turn.steps:
            for call in step.tool_calls:  # one tool per ReAct step
                out.append(
                    {
                        "next_thought": f"I should call {call.name}.",
                        "next_tool_name": call.name,
                        "next_tool_args": call.arguments,
                    }
                )
        out.append(
            {"next_thought": "I can answer now.", "next_tool_name": "finish", "next_tool_args": {}}
        )
        out.append({"reasoning": "From the observations.", "answer": turn.answer})
    return out


def run_turns() -> list[str | None]:
    import dspy
    from dspy.utils import DummyLM
    from openinference.instrumentation import using_session

    dspy.configure(lm=DummyLM(scripted_outputs()))
    agent = dspy.ReAct("question -> answer", tools=list(harness.TOOLS.values()))
    answers: list[str | None] = []
    with using_session(harness.CONVERSATION_ID):
        for turn in harness.TURNS:
            answers.append(agent(question=turn.query).answer)
    return answers


def generate(scenario: str) -> Path:
    settings = harness.content_capture_env()
    settings["using_session"] = harness.CONVERSATION_ID
    from openinference.instrumentation.dspy import DSPyInstrumentor

    capture = support.run_instrumented(scenario, support.installer(DSPyInstrumentor), run_turns)
    meta = support.meta(
        "dspy",
        "openinference-instrumentation-dspy",
        settings=settings,
        agent_name=None,
        notes=[
            "Model: dspy.utils.DummyLM replaying the script as ReAct output fields through "
            "DSPy's ChatAdapter.",
            "ReAct calls one tool per step: turn 1's parallel get_weather calls are two "
            "consecutive steps. ReAct ends each turn with its own `finish` tool and an "
            "extract step that writes the answer; `finish` is not a scenario tool call.",
            "ReAct catches the failing tool's exception and shows the model "
            "'Execution error in book_flight: ...'.",
        ],
    )
    return capture.write(scenario, meta)


if __name__ == "__main__":
    raise SystemExit(support.run_cli(dict.fromkeys(SCENARIOS, generate), __doc__))
