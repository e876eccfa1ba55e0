"""Conversation judges: 1,000 completed 5-turn conversations, each judged once by a
conversation judge (`goal_completion`) through a scripted langchain-core chat model
that answers after 50 ms, with the collector's default judge concurrency (4).

What the figures cover: `Evaluator.aevaluate` of every conversation (reference-free
scoring, learned checks, rendering the whole conversation, building the prompt, the
judge's call path with its semaphore, parsing the verdict, attaching the judgement),
8 conversations in flight as in `tracepass serve` (`evaluation_concurrency`), wall time
from the first conversation to the last judgement. Not covered: ingest, assembly,
storage, metrics (the collector's other benchmarks).

Baseline measured in the same run: the per-turn judge (`llm` grader on every turn of a
5-turn reference) over the same conversations with the same model and concurrency: five
calls per conversation instead of one. The scripted model's 50 ms dominates both; the
floor is calls × 50 ms / concurrency (12.5 s for the conversation judge at 1,000).
Target: conversation judge ≤ 15 s at 1,000 conversations.

    .venv/bin/python bench/bench_conversation_judge.py [--conversations N] [--delay-ms D]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from tracepass.evaluator.judge.llm_judge import LLMJudge
from tracepass.evaluator.models import (
    Conversation,
    ConversationJudgeSpec,
    GraderSpec,
    Reference,
    ReferenceTurn,
    ToolCall,
    Turn,
)
from tracepass.evaluator.scoring.evaluator import EvaluationConfig, Evaluator

TURNS = 5
DEFAULT_CONCURRENCY = 4  # evaluation.judge_concurrency's default
EVALUATION_CONCURRENCY = 8  # the pipeline's evaluations in flight
VERDICT = '```json\n{"reasoning": "goals met", "score": 0.9}\n```'


class SlowScriptedJudge(BaseChatModel):
    """Answers every call with a passing verdict after `delay_s` (a provider's latency)."""

    delay_s: float = 0.05
    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "scripted-slow"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        raise NotImplementedError("async only")

    async def _agenerate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        self.calls += 1
        await asyncio.sleep(self.delay_s)
        message = AIMessage(
            content=VERDICT,
            usage_metadata={"input_tokens": 900, "output_tokens": 40, "total_tokens": 940},
            response_metadata={"model_name": "gpt-4o-mini"},
        )
        return ChatResult(generations=[ChatGeneration(message=message)])


def conversations(n: int) -> list[Conversation]:
    out = []
    for i in range(n):
        turns = tuple(
            Turn(
                query=f"conversation {i}: request {t} about city {i % 97}",
                answer=f"done {i}.{t}: 18 C and clear",
                tool_calls=(
                    ToolCall(
                        name="get_weather",
                        arguments={"city": f"City{i % 97}", "unit": "celsius"},
                        result={"celsius": 18, "sky": "clear", "n": i * TURNS + t},
                    ),
                ),
            )
            for t in range(TURNS)
        )
        out.append(Conversation(id=f"c{i}", agent_name="bench", agent_version="1", turns=turns))
    return out


async def run_all(
    evaluator: Evaluator, convs: list[Conversation], reference: Reference | None
) -> float:
    semaphore = asyncio.Semaphore(EVALUATION_CONCURRENCY)

    async def one(conv: Conversation) -> None:
        async with semaphore:
            result = await evaluator.aevaluate(
                conv, reference, reference_set="bench" if reference else None
            )
        assert result.outcome.value != "error", result

    start = time.perf_counter()
    await asyncio.gather(*(one(c) for c in convs))
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=1000)
    parser.add_argument("--delay-ms", type=float, default=50.0)
    args, _ = parser.parse_known_args()  # run_all.py passes every script the same flags
    convs = conversations(args.conversations)
    delay = args.delay_ms / 1000

    model = SlowScriptedJudge(delay_s=delay)
    judge = LLMJudge(model, concurrency=DEFAULT_CONCURRENCY)
    evaluator = Evaluator(
        EvaluationConfig(),
        judge=judge,
        conversation_judges=[
            ConversationJudgeSpec(name="goal_completion", rubric="goal_completion")
        ],
    )
    conv_wall = asyncio.run(run_all(evaluator, convs, None))
    conv_calls = model.calls

    base_model = SlowScriptedJudge(delay_s=delay)
    base_judge = LLMJudge(base_model, concurrency=DEFAULT_CONCURRENCY)
    reference = Reference(
        id="bench",
        turns=tuple(
            ReferenceTurn(query=f"request {t}", graders=(GraderSpec(type="llm"),))
            for t in range(TURNS)
        ),
    )
    turn_wall = asyncio.run(
        run_all(Evaluator(EvaluationConfig(), judge=base_judge), convs, reference)
    )
    turn_calls = base_model.calls

    n = args.conversations
    floor = conv_calls * delay / DEFAULT_CONCURRENCY
    print(
        f"conversations: {n} x {TURNS} turns; scripted judge latency {args.delay_ms:g} ms; judge concurrency {DEFAULT_CONCURRENCY}"
    )
    print(
        f"conversation judge (goal_completion): {conv_wall:.2f} s wall, {conv_calls} calls, "
        f"{n / conv_wall:.0f} conversations/s; floor (calls x latency / concurrency) {floor:.2f} s"
        + (f", {conv_wall / floor:.2f}x the floor" if floor > 0 else "")
    )
    print(
        f"per-turn judge (llm grader on each turn, same run): {turn_wall:.2f} s wall, {turn_calls} calls, "
        f"{n / turn_wall:.0f} conversations/s"
    )
    print(f"ratio per-turn / conversation judge wall time: {turn_wall / conv_wall:.2f}x")
    target = 15.0 * n / 1000
    print(
        f"target <= {target:.1f} s for {n} conversations: {'met' if conv_wall <= target else 'MISSED'}"
    )


if __name__ == "__main__":
    main()
