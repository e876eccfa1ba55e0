"""A deterministic judge for trying conversation judges without a model provider.

A langchain-core chat model (no network, no API key) that answers the prompts of
tracepass's judges the way a careful judge would on the example travel agent, from
simple rules, so `tracepass demo` and local runs show real verdicts:

* a **conversation judge** prompt (docs/judges.md): the conversation fails (score 0.2)
  when a tool call returned an error, a turn has no answer or a turn failed, or when an
  answer contradicts its tool's result (a number in the result missing from the answer
  that followed it); otherwise it passes (score 0.9). The reasoning names what it saw.
* a per-turn `llm` grader prompt: 1.0 when the reference answer appears in the answer
  (case-insensitively), else 0.3.
* a failure-mode summary prompt (`failure_modes.summarize`, docs/failure-modes.md): a
  sentence naming how many reasons it read and the most frequent one.

Replies carry `usage_metadata` like a provider's (tokens estimated as characters / 4)
under the model name `scripted-judge`, which no price list knows: its calls are counted
as unpriced (`tracepass_judge_unpriced_calls_total{reason="unknown_model"}`) unless
`pricing.models` gives it a price.

    # tracepass serve config (run from the repository root)
    evaluation:
      judge: examples.scripted_judge:model
      conversation_judges:
        - {name: goal_completion, rubric: goal_completion}
"""

from __future__ import annotations

import json
import re
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

MODEL_NAME = "scripted-judge"
_BLOCK = re.compile(r"<conversation>\n(.*)\n</conversation>", re.S)
_TAG = re.compile(r"<(reference_answer|answer_under_evaluation)>\n(.*?)\n</\1>", re.S)
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_MODE = re.compile(r"<failure_mode>\n(.*?)\n</failure_mode>", re.S)
_REASON = re.compile(r"<reason>\n(.*?)\n</reason>", re.S)


def _mode_summary(prompt: str) -> str | None:
    """A failure-mode summary prompt's answer (None: not such a prompt)."""
    mode = _MODE.search(prompt)
    if mode is None:
        return None
    reasons = _REASON.findall(prompt)
    common = max(set(reasons), key=lambda r: (reasons.count(r), r)) if reasons else "none"
    return f"{len(reasons)} reasons for {mode.group(1)}; most often: {common[:200]}"


def _conversation_verdict(text: str) -> tuple[float, str]:
    problems: list[str] = []
    turn = "?"
    last_result = ""
    for line in text.splitlines():
        if line.startswith("=== Turn "):
            turn = line.split()[2]
            last_result = ""
        elif line.startswith("  error: "):
            problems.append(f"turn {turn}: a tool call failed ({line[9:].strip()[:60]})")
        elif line.startswith("  result: "):
            last_result = line[10:]
        elif line.startswith("Turn error: "):
            problems.append(f"turn {turn}: the turn failed")
        elif line == "Agent answer: (no answer recorded)":
            problems.append(f"turn {turn}: no answer")
        elif line.startswith("Agent answer: ") and last_result:
            answer = line[14:]
            numbers = [n for n in _NUMBER.findall(last_result) if len(n.strip("-.")) >= 2]
            if numbers and not any(n in answer for n in numbers):
                problems.append(f"turn {turn}: the answer does not use the tool's result")
    if problems:
        return 0.2, "Goal not achieved: " + "; ".join(problems[:3]) + "."
    return 0.9, "Every request was handled with tool results that the answers use."


def _turn_verdict(prompt: str) -> tuple[float, str]:
    blocks = {m.group(1): m.group(2) for m in _TAG.finditer(prompt)}
    expected = blocks.get("reference_answer", "").strip().lower()
    answer = blocks.get("answer_under_evaluation", "").strip().lower()
    if expected and expected in answer:
        return 1.0, "The answer states the reference answer."
    return 0.3, "The answer does not state the reference answer."


class ScriptedJudge(BaseChatModel):
    """See the module docstring."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    @property
    def model_name(self) -> str:
        return MODEL_NAME

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        prompt = str(messages[-1].content)
        summary = _mode_summary(prompt)
        if summary is not None:
            content = summary
        else:
            found = _BLOCK.search(prompt)
            verdict = _conversation_verdict(found.group(1)) if found else _turn_verdict(prompt)
            score, reasoning = verdict
            content = "```json\n" + json.dumps({"reasoning": reasoning, "score": score}) + "\n```"
        prompt_chars = sum(len(str(m.content)) for m in messages)
        usage = {
            "input_tokens": prompt_chars // 4,
            "output_tokens": len(content) // 4,
            "total_tokens": prompt_chars // 4 + len(content) // 4,
        }
        message = AIMessage(
            content=content,
            usage_metadata=usage,  # type: ignore[arg-type]
            response_metadata={"model_name": MODEL_NAME},
        )
        return ChatResult(generations=[ChatGeneration(message=message)])


model = ScriptedJudge()
