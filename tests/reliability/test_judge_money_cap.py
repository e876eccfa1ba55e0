"""Third attack, finding 10: the judge's money cap was overspent about 7x.

With `usd_per_day: 0.01` and calls of $0.004, 18 calls ($0.072) went through: every call
waiting for a concurrency slot had passed the budget check before any of them had been
charged. Now a call reserves its estimated cost once it holds a slot, and until the
judge's first answer (no cost history) calls under a money cap go one at a time. The
scripted model here is slow, priced, and asked by 30 conversations at once."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

from tracepass.evaluator.judge.call_budget import JudgeBudget
from tracepass.evaluator.judge.conversation_judges import ConversationJudges
from tracepass.evaluator.judge.llm_judge import LLMJudge
from tracepass.evaluator.models import Conversation, ConversationJudgeSpec, Outcome, Turn
from tracepass.evaluator.pricing import PriceBook, TokenUsage

MODEL = "gpt-4o-mini"
USAGE = {"input_tokens": 20_000, "output_tokens": 1_667, "total_tokens": 21_667}
VERDICT = '```json\n{"reasoning": "ok", "score": 0.9}\n```'


class SlowPricedJudge(BaseChatModel):
    """Answers a passing verdict after a pause, with usage the price library knows."""

    calls: list[int] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "slow-priced"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        raise NotImplementedError("async only")

    async def _agenerate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        self.calls.append(1)
        await asyncio.sleep(0.05)
        message = AIMessage(
            content=VERDICT,
            usage_metadata=USAGE,  # type: ignore[arg-type]
            response_metadata={"model_name": MODEL},
        )
        return ChatResult(generations=[ChatGeneration(message=message)])


def _conversation(n: int) -> Conversation:
    return Conversation(
        id=f"c{n}",
        agent_name="shop",
        agent_version="1",
        complete=True,
        turns=(Turn(query=f"question {n}", answer=f"answer {n}"),),
    )


@pytest.mark.parametrize("concurrency", [1, 4, 16])
def test_concurrent_judging_never_spends_past_the_cap(concurrency: int) -> None:
    per_call = PriceBook().cost_usd(
        MODEL, TokenUsage(USAGE["input_tokens"], USAGE["output_tokens"])
    )
    assert per_call == pytest.approx(0.004, rel=0.01)
    cap = 0.01
    budget = JudgeBudget(usd_per_day=cap)
    model = SlowPricedJudge()
    judge = LLMJudge(model, budget=budget, concurrency=concurrency, max_retries=0)
    judges = ConversationJudges(
        [ConversationJudgeSpec(name="goal_completion", rubric="goal_completion")], judge
    )

    async def all_at_once() -> list[Any]:
        convs = [_conversation(n) for n in range(30)]
        runs = [judges.run(c, judges.select(c, None, None)) for c in convs]
        return [j for js in await asyncio.gather(*runs) for j in js]

    verdicts = asyncio.run(all_at_once())
    spent = budget.spent_usd_today()
    assert spent <= cap
    assert len(model.calls) == 2  # $0.008; a third call would make $0.012
    outcomes = [v.outcome for v in verdicts]
    assert outcomes.count(Outcome.PASS) == 2
    assert outcomes.count(Outcome.SKIPPED_BUDGET) == 28
    assert budget.reserved_usd() == 0
