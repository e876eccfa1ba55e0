"""The scoring entry point: one conversation + its reference → `ConversationResult`.

Called by the collector for every rebuilt conversation and by `tracepass evaluate`, so
it is a hot path: the expected side of each reference is compiled once (matchers,
name indexes, whether grading can run without an event loop) and results are built with
`model_construct` (their inputs are already validated models).

Rules (docs/metrics.md has the full table):

* turns pair with reference turns by position;
* turn correct ⇔ the answer is correct (or not graded) AND tool correctness is None or
  correct — in both profiles (Fair Forge's code ignores tool correctness here, its
  paper does not);
* outcome ERROR if any grader or argument matcher failed (never a silent 0), else
  INCOMPLETE if the conversation has fewer turns than the reference or was not
  complete, else PASS if every turn is correct and the turn counts match, else FAIL;
* no reference → every turn unscored and outcome UNSCORED (INCOMPLETE if not complete).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tracepass.evaluator.answers import AnswerResult, grade_answer
from tracepass.evaluator.argmatch import ArgumentMatchError
from tracepass.evaluator.fairforge import fair_forge_tool_correctness
from tracepass.evaluator.graders import GraderConfigError, grader_class
from tracepass.evaluator.models import (
    Conversation,
    ConversationResult,
    ExpectedTool,
    GraderResult,
    Outcome,
    Reference,
    ReferenceTurn,
    ToolCall,
    ToolCorrectness,
    TrajectoryScores,
    TurnResult,
    construct_unchecked,
)
from tracepass.evaluator.toolcorrectness import CompiledTurn, compile_turn, normalize_weights
from tracepass.evaluator.toolcorrectness import tool_correctness as _tool_correctness
from tracepass.evaluator.trajectory import conversation_trajectory, trajectory_scores

if TYPE_CHECKING:
    from tracepass.evaluator.judge import LLMJudge

__all__ = ["EvaluationConfig", "Evaluator", "ToolWeights"]


class ToolWeights(BaseModel):
    """Weights of the four tool-correctness dimensions: non-negative, not all zero;
    normalized to sum 1 in the default profile (used as given in `fair-forge`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    selection: float = 0.25
    parameters: float = 0.25
    sequence: float = 0.25
    utilization: float = 0.25

    @model_validator(mode="after")
    def _check(self) -> ToolWeights:
        normalize_weights(self.selection, self.parameters, self.sequence, self.utilization)
        return self

    def raw(self) -> tuple[float, float, float, float]:
        return (self.selection, self.parameters, self.sequence, self.utilization)

    def normalized(self) -> tuple[float, float, float, float]:
        return normalize_weights(*self.raw())


class EvaluationConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    profile: Literal["default", "fair-forge"] = "default"
    threshold: float = Field(default=0.7, ge=0.0, le=1.0)
    tool_threshold: float = Field(default=1.0, ge=0.0, le=1.0)
    weights: ToolWeights = Field(default_factory=ToolWeights)
    default_grader: str = "contains"
    trajectory_match: Literal["name", "name_and_arguments"] = "name"
    utilization: Literal["auto", "declared", "detected"] = "auto"


@dataclass(frozen=True, slots=True)
class _CompiledReference:
    reference: Reference
    turns: tuple[CompiledTurn | None, ...]
    # grading needs a running event loop (llm / command / custom graders, or several
    # graders on one turn, which grade_answer gathers)
    needs_loop: bool


def _type_needs_loop(type_name: str) -> bool:
    """Graders declare whether they ever await (`needs_loop`); deterministic ones do not,
    so a conversation graded only by them is scored without an event loop."""
    try:
        return grader_class(type_name).needs_loop
    except (GraderConfigError, LookupError):
        return False  # unknown type: an error result, produced without awaiting


def _turn_needs_loop(rt: ReferenceTurn, default_grader: str) -> bool:
    if rt.graders:
        return any(_type_needs_loop(g.type) for g in rt.graders)
    return rt.expected_answer is not None and _type_needs_loop(default_grader)


def _turn_result(
    *,
    index: int,
    query: str | None,
    answer: str | None,
    answer_score: float | None,
    answer_correct: bool | None,
    tool_correctness: ToolCorrectness | None,
    trajectory: TrajectoryScores | None,
    tool_calls: tuple[ToolCall, ...],
    correct: bool | None,
    expected_answer: str | None = None,
    answer_error: str | None = None,
    graders: tuple[GraderResult, ...] = (),
    expected_tools: tuple[ExpectedTool, ...] | None = None,
    tool_error: str | None = None,
) -> TurnResult:
    # every field of TurnResult, in one dict: see models.construct_unchecked
    return construct_unchecked(
        TurnResult,
        {
            "index": index,
            "query": query,
            "answer": answer,
            "expected_answer": expected_answer,
            "answer_score": answer_score,
            "answer_correct": answer_correct,
            "answer_error": answer_error,
            "graders": graders,
            "tool_correctness": tool_correctness,
            "trajectory": trajectory,
            "tool_calls": tool_calls,
            "expected_tools": expected_tools,
            "correct": correct,
            "tool_error": tool_error,
        },
    )


def _conv_result(
    *,
    conversation_id: str,
    reference_id: str | None,
    reference_set: str | None,
    agent_name: str | None,
    agent_version: str | None,
    correct: bool,
    outcome: Outcome,
    turns: tuple[TurnResult, ...],
    trajectory: TrajectoryScores | None,
) -> ConversationResult:
    return construct_unchecked(
        ConversationResult,
        {
            "conversation_id": conversation_id,
            "reference_id": reference_id,
            "reference_set": reference_set,
            "agent_name": agent_name,
            "agent_version": agent_version,
            "correct": correct,
            "outcome": outcome,
            "turns": turns,
            "trajectory": trajectory,
        },
    )


class Evaluator:
    """Scores conversations against references. Reusable and cheap to call; holds a
    small cache of compiled references keyed by identity."""

    _CACHE_LIMIT = 4096

    def __init__(
        self, config: EvaluationConfig | None = None, judge: LLMJudge | None = None
    ) -> None:
        self.config = config if config is not None else EvaluationConfig()
        self.judge = judge
        cfg = self.config
        self._fair_forge = cfg.profile == "fair-forge"
        self._weights = cfg.weights.raw() if self._fair_forge else cfg.weights.normalized()
        self._by_args = cfg.trajectory_match == "name_and_arguments"
        self._compiled: dict[int, _CompiledReference] = {}

    # ------------------------------------------------------------------ compile

    def _compile(self, reference: Reference) -> _CompiledReference:
        hit = self._compiled.get(id(reference))
        if hit is not None and hit.reference is reference:
            return hit
        dg = self.config.default_grader
        compiled = _CompiledReference(
            reference=reference,
            turns=tuple(compile_turn(t) for t in reference.turns),
            needs_loop=self.judge is not None
            or any(_turn_needs_loop(t, dg) for t in reference.turns),
        )
        if len(self._compiled) >= self._CACHE_LIMIT:
            self._compiled.clear()
        self._compiled[id(reference)] = compiled
        return compiled

    # ------------------------------------------------------------------ scoring

    def _reference_free(
        self, conversation: Conversation, reference_set: str | None
    ) -> ConversationResult:
        turns = tuple(
            _turn_result(
                index=i,
                query=t.query,
                answer=t.answer,
                answer_score=None,
                answer_correct=None,
                tool_correctness=None,
                trajectory=None,
                tool_calls=t.tool_calls,
                correct=None,
            )
            for i, t in enumerate(conversation.turns)
        )
        return _conv_result(
            conversation_id=conversation.id,
            reference_id=None,
            reference_set=reference_set,
            agent_name=conversation.agent_name,
            agent_version=conversation.agent_version,
            correct=False,
            outcome=Outcome.UNSCORED if conversation.complete else Outcome.INCOMPLETE,
            turns=turns,
            trajectory=None,
        )

    async def _grade(
        self, rt: ReferenceTurn, query: str | None, answer: str | None, results: Sequence[Any]
    ) -> AnswerResult:
        cfg = self.config
        try:
            return await grade_answer(
                rt,
                query=query,
                answer=answer,
                threshold=cfg.threshold,
                default_grader=cfg.default_grader,
                judge=self.judge,
                tool_results=results,
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # grade_answer reports errors itself; this is a backstop
            return AnswerResult(
                score=None, correct=None, error=f"{type(exc).__name__}: {exc}", graders=()
            )

    async def aevaluate(
        self,
        conversation: Conversation,
        reference: Reference | None,
        *,
        reference_set: str | None = None,
    ) -> ConversationResult:
        if reference is None:
            return self._reference_free(conversation, reference_set)
        cfg = self.config
        cref = self._compile(reference)
        turns = conversation.turns
        rturns = reference.turns
        n_ref = len(rturns)
        paired = min(len(turns), n_ref)

        tool_results = [
            [c.result for c in turns[i].tool_calls if c.result is not None] for i in range(paired)
        ]
        if cref.needs_loop and paired > 1:
            answers: list[AnswerResult] = list(
                await asyncio.gather(
                    *(
                        self._grade(rturns[i], turns[i].query, turns[i].answer, tool_results[i])
                        for i in range(paired)
                    )
                )
            )
        else:
            answers = [
                await self._grade(rturns[i], turns[i].query, turns[i].answer, tool_results[i])
                for i in range(paired)
            ]

        error = False
        all_correct = len(turns) == n_ref
        results: list[TurnResult] = []
        fair_forge = self._fair_forge
        weights = self._weights
        by_args = self._by_args
        for i, turn in enumerate(turns):
            calls = turn.tool_calls
            if i >= n_ref:
                results.append(
                    _turn_result(
                        index=i,
                        query=turn.query,
                        answer=turn.answer,
                        answer_score=None,
                        answer_correct=None,
                        tool_correctness=None,
                        trajectory=None,
                        tool_calls=calls,
                        correct=None,
                    )
                )
                continue
            rt = rturns[i]
            tc: ToolCorrectness | None = None
            traj: TrajectoryScores | None = None
            tool_error: str | None = None
            try:
                if fair_forge:
                    tc = fair_forge_tool_correctness(
                        calls,
                        rt,
                        declared=turn.final_answer_uses_tools,
                        weights=weights,
                        tool_threshold=cfg.tool_threshold,
                    )
                else:
                    tc = _tool_correctness(
                        calls,
                        cref.turns[i],
                        answer=turn.answer,
                        declared=turn.final_answer_uses_tools,
                        weights=weights,
                        tool_threshold=cfg.tool_threshold,
                        utilization=cfg.utilization,
                    )
                if rt.expected_tools is not None:
                    traj = trajectory_scores(
                        calls, rt.expected_tools, match="name_and_arguments" if by_args else "name"
                    )
            except ArgumentMatchError as exc:
                tc, traj, tool_error = None, None, str(exc)
            ans = answers[i]
            correct: bool | None
            if ans.error is not None or tool_error is not None:
                error = True
                correct = None
            else:
                answer_ok = True if ans.correct is None else ans.correct
                correct = answer_ok and (tc is None or tc.correct)
            if not correct:
                all_correct = False
            graders: tuple[GraderResult, ...] = ans.graders
            results.append(
                _turn_result(
                    index=i,
                    query=turn.query,
                    answer=turn.answer,
                    expected_answer=rt.expected_answer,
                    answer_score=ans.score,
                    answer_correct=ans.correct,
                    answer_error=ans.error,
                    graders=graders,
                    tool_correctness=tc,
                    trajectory=traj,
                    tool_calls=calls,
                    expected_tools=rt.expected_tools,
                    correct=correct,
                    tool_error=tool_error,
                )
            )

        conv_traj: TrajectoryScores | None
        try:
            conv_traj = conversation_trajectory(turns, reference, match=cfg.trajectory_match)
        except ArgumentMatchError:
            conv_traj = None
            error = True
        if error:
            outcome = Outcome.ERROR
        elif len(turns) < n_ref or not conversation.complete:
            outcome = Outcome.INCOMPLETE
        elif all_correct:
            outcome = Outcome.PASS
        else:
            outcome = Outcome.FAIL
        return _conv_result(
            conversation_id=conversation.id,
            reference_id=reference.id,
            reference_set=reference_set,
            agent_name=conversation.agent_name,
            agent_version=conversation.agent_version,
            correct=outcome is Outcome.PASS,
            outcome=outcome,
            turns=tuple(results),
            trajectory=conv_traj,
        )

    def evaluate(
        self,
        conversation: Conversation,
        reference: Reference | None,
        *,
        reference_set: str | None = None,
    ) -> ConversationResult:
        """Synchronous wrapper. With loop-free graders only (exact, contains, regex, …)
        the coroutine is driven directly — no event loop per call; otherwise
        `asyncio.run`. Inside a running loop use `aevaluate`."""
        if reference is None or not self._compile(reference).needs_loop:
            coro = self.aevaluate(conversation, reference, reference_set=reference_set)
            done, value = _drive(coro)
            if done:
                assert value is not None
                return value
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.aevaluate(conversation, reference, reference_set=reference_set))
        raise RuntimeError(
            "Evaluator.evaluate() called inside a running event loop; await aevaluate() instead"
        )


def _drive(coro: Coroutine[Any, Any, ConversationResult]) -> tuple[bool, ConversationResult | None]:
    """Run a coroutine that should never suspend. (False, None) if it tried to."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return True, stop.value
    except RuntimeError as exc:
        if "event loop" not in str(exc):
            raise
        return False, None
    coro.close()
    return False, None
