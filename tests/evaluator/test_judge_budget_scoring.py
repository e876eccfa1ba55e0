"""A spent judge budget makes conversations `skipped_budget` (no trial), never failures,
and the judge makes no more model calls than the budget allows."""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from tracepass.evaluator.judge.call_budget import JudgeBudget
from tracepass.evaluator.judge.llm_judge import LLMJudge
from tracepass.evaluator.models import (
    Conversation,
    GraderSpec,
    Outcome,
    Reference,
    ReferenceTurn,
    Turn,
)
from tracepass.evaluator.scoring.evaluator import Evaluator

VERDICT = '```json\n{"score": 1.0, "reasoning": "right"}\n```'


class CountingChatModel(BaseChatModel):
    """A fake chat model that counts the calls it receives (only the LLM is fake)."""

    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "counting"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        raise NotImplementedError("async only")

    async def _agenerate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        self.calls += 1
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=VERDICT))])


REFERENCE = Reference(
    id="ref-1",
    turns=(
        ReferenceTurn(
            query="Capital of France?",
            expected_answer="Paris",
            graders=(GraderSpec(type="llm"),),
        ),
    ),
)


def _conversation(n: int) -> Conversation:
    # Distinct answers: no verdict is served from the in-flight coalescing.
    return Conversation(
        id=f"c{n}",
        turns=(Turn(query="Capital of France?", answer=f"Paris ({n})"),),
        complete=True,
    )


def test_budget_caps_model_calls_and_skips_the_rest() -> None:
    model = CountingChatModel()
    budget = JudgeBudget(calls_per_day=3)
    judge = LLMJudge(model, use_structured_output=False, budget=budget, backoff_s=0.0)
    evaluator = Evaluator(judge=judge)

    async def run() -> list[Outcome]:
        results = [await evaluator.aevaluate(_conversation(n), REFERENCE) for n in range(8)]
        return [r.outcome for r in results]

    outcomes = asyncio.run(run())
    assert model.calls == 3
    assert outcomes == [Outcome.PASS] * 3 + [Outcome.SKIPPED_BUDGET] * 5
    assert budget.remaining() == {"day": 0.0}


def test_skipped_budget_keeps_the_reference_id_and_is_not_correct() -> None:
    judge = LLMJudge(
        CountingChatModel(), use_structured_output=False, budget=JudgeBudget(calls_per_day=0)
    )
    result = Evaluator(judge=judge).evaluate(_conversation(0), REFERENCE)
    assert result.outcome is Outcome.SKIPPED_BUDGET
    assert result.reference_id == "ref-1"
    assert result.correct is False
