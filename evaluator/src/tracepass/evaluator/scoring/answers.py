"""Answer correctness for one turn: run the turn's graders and combine their verdicts.

Which graders run
    The turn's `graders`; if it names none but has an `expected_answer`, one grader of
    type `default_grader`; if it has neither, the turn is *not graded*
    (score None, correct None, error None) and scoring treats the answer as not
    applicable.

Combination (documented in docs/graders.md)
    * every grader yields a score in [0, 1] and passed/failed;
    * score = Σ wᵢ·scoreᵢ / Σ wᵢ (weights from the specs, all > 0);
    * correct = every grader passed AND score ≥ threshold − 1e-9 (the tolerance only
      absorbs floating-point error in the weighted mean, e.g. three graders at 1.0);
    * any grader error (invalid options, unreachable judge, crashing command, …) →
      score None, correct None and `error` names each failing grader. An error is "no
      verdict", never a silent 0.0, so that scoring can report the turn as ERROR.

Graders whose class says `needs_loop = False` (all deterministic built-ins) run one after
the other without suspending, so `grade_answer` for them never needs an event loop; I/O
graders (`command`, `llm`, custom ones by default) on a turn with several graders run
concurrently with `asyncio.gather`.

For the scoring hot path a reference turn's grading is compiled once (`TurnGrading`:
specs resolved to graders, the missing-answer verdict precomputed) and deterministic
graders are called through `Grader.grade_sync`, without a coroutine. Results are built
without re-validating our own values; a grader verdict of unexpected types (a custom
grader returning an int score, say) still goes through pydantic validation, which
coerces it exactly as before.

A missing answer (the agent produced none) is a failure, not an error: every grader
gets score 0.0 / failed without running, because "no answer" is a wrong answer whatever
the grader would check.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from pydantic import BaseModel, ConfigDict

from tracepass.evaluator.graders.base import (
    GradeInput,
    Grader,
    GraderConfigError,
    NeedsEventLoop,
    Verdict,
)
from tracepass.evaluator.graders.grader_registry import cached_grader, display_name
from tracepass.evaluator.judge.call_budget import JudgeBudgetExhausted
from tracepass.evaluator.models import GraderResult, GraderSpec, ReferenceTurn, construct_unchecked
from tracepass.evaluator.vocabulary import DEFAULT_GRADER

if TYPE_CHECKING:
    from tracepass.evaluator.judge.llm_judge import LLMJudge

__all__ = ["SCORE_TOLERANCE", "AnswerResult", "TurnAnswer", "TurnGrading", "grade_answer"]

SCORE_TOLERANCE = 1e-9
_new_tuple = tuple.__new__
_default_specs: dict[str, GraderSpec] = {}
_MEMO_LIMIT = 256


class AnswerResult(BaseModel):
    """The combined verdict on one turn's answer (see the module docstring)."""

    model_config = ConfigDict(frozen=True)

    score: float | None
    correct: bool | None
    error: str | None
    graders: tuple[GraderResult, ...]


class TurnAnswer(NamedTuple):
    """`AnswerResult`'s fields as a plain tuple: what scoring uses internally (one is
    made per graded turn, and a NamedTuple costs a fraction of a model)."""

    score: float | None
    correct: bool | None
    error: str | None
    graders: tuple[GraderResult, ...]


NOT_GRADED = AnswerResult(score=None, correct=None, error=None, graders=())
_NOT_GRADED = TurnAnswer(None, None, None, ())


def _default_spec(type_name: str) -> GraderSpec:
    # One spec object per default type, so the grader cache keyed by spec identity hits.
    spec = _default_specs.get(type_name)
    if spec is None:
        spec = _default_specs[type_name] = GraderSpec(type=type_name)
    return spec


def _result(
    name: str,
    score: float | None,
    passed: bool | None,
    error: str | None = None,
    reasoning: str | None = None,
) -> GraderResult:
    # Values of exactly the field types (always so for built-in graders) need no
    # validation; anything else (an int score from a custom grader, say) is validated,
    # i.e. coerced or rejected exactly as the plain constructor does.
    if (
        type(name) is str
        and (score is None or type(score) is float)
        and (passed is None or type(passed) is bool)
        and (error is None or type(error) is str)
        and (reasoning is None or type(reasoning) is str)
    ):
        return construct_unchecked(
            GraderResult,
            {
                "grader": name,
                "score": score,
                "passed": passed,
                "error": error,
                "reasoning": reasoning,
            },
        )
    return GraderResult(grader=name, score=score, passed=passed, error=error, reasoning=reasoning)


def _from_verdict(name: str, verdict: Verdict) -> GraderResult:
    if verdict.error is not None or verdict.score is None or verdict.passed is None:
        return _result(
            name, None, None, verdict.error or "grader returned no score", verdict.reasoning
        )
    return _result(name, verdict.score, verdict.passed, None, verdict.reasoning)


async def _run_one(spec: GraderSpec, inp: GradeInput) -> GraderResult:
    try:
        grader = cached_grader(spec)
    except GraderConfigError as exc:
        return _result(display_name(spec), None, None, str(exc))
    name = grader.name
    try:
        verdict: Verdict = await grader.grade(inp)
    except GraderConfigError as exc:
        return _result(name, None, None, str(exc))
    except (asyncio.CancelledError, JudgeBudgetExhausted):
        raise  # a spent judge budget skips the conversation; it is no grader error
    except Exception as exc:  # a grader bug must not take the whole evaluation down
        return _result(name, None, None, f"{type(exc).__name__}: {exc}")
    return _from_verdict(name, verdict)


def _run_one_sync(spec: GraderSpec, grader: Grader[Any] | None, inp: GradeInput) -> GraderResult:
    """`_run_one` for a grader with `needs_loop = False` (raises `NeedsEventLoop` if it
    suspends after all)."""
    if grader is None:  # its spec did not build at compile time: report why, now
        try:
            grader = cached_grader(spec)
        except GraderConfigError as exc:
            return _result(display_name(spec), None, None, str(exc))
    name = grader.name
    try:
        verdict = grader.grade_sync(inp)
    except NeedsEventLoop:
        raise
    except GraderConfigError as exc:
        return _result(name, None, None, str(exc))
    except Exception as exc:  # a grader bug must not take the whole evaluation down
        return _result(name, None, None, f"{type(exc).__name__}: {exc}")
    return _from_verdict(name, verdict)


def _combine(
    specs: Sequence[GraderSpec], results: Sequence[GraderResult], threshold: float
) -> TurnAnswer:
    if len(results) == 1:  # the common case, without the generic machinery
        r = results[0]
        if r.error is not None:
            return TurnAnswer(None, None, f"{r.grader}: {r.error}", (r,))
        score = r.score if r.score is not None else 0.0
        return TurnAnswer(
            score, bool(r.passed) and score >= threshold - SCORE_TOLERANCE, None, (r,)
        )
    errors = [f"{r.grader}: {r.error}" for r in results if r.error is not None]
    if errors:
        return TurnAnswer(None, None, "; ".join(errors), tuple(results))
    total_w = sum(s.weight for s in specs)
    score = sum(s.weight * (r.score or 0.0) for s, r in zip(specs, results, strict=True)) / total_w
    score = min(1.0, max(0.0, score))
    correct = all(r.passed for r in results) and score >= threshold - SCORE_TOLERANCE
    return TurnAnswer(score, correct, None, tuple(results))


def _public(a: TurnAnswer) -> AnswerResult:
    return AnswerResult(score=a.score, correct=a.correct, error=a.error, graders=a.graders)


def combine(
    specs: Sequence[GraderSpec], results: Sequence[GraderResult], threshold: float
) -> AnswerResult:
    """Combine per-grader results by the rules in the module docstring."""
    return _public(_combine(specs, results, threshold))


def _missing(specs: Sequence[GraderSpec], threshold: float) -> TurnAnswer:
    """No answer: every grader fails with 0.0, without running (module docstring)."""
    results = [_result(display_name(s), 0.0, False, None, "the turn has no answer") for s in specs]
    return _combine(specs, results, threshold)


def _grader_or_none(spec: GraderSpec) -> Grader[Any] | None:
    try:
        return cached_grader(spec)
    except GraderConfigError:
        return None  # reported as an error result when the turn is graded


class TurnGrading:
    """One reference turn's answer grading, resolved once (per reference turn, threshold
    and default grader) and then applied to every actual turn paired with it."""

    __slots__ = (
        "_memo",
        "expected",
        "graded",
        "graders",
        "judge",
        "missing",
        "needs_loop",
        "specs",
        "threshold",
        "uses_tool_results",
    )

    def __init__(
        self,
        reference_turn: ReferenceTurn,
        *,
        threshold: float,
        default_grader: str = DEFAULT_GRADER,
        judge: LLMJudge | None = None,
    ) -> None:
        specs: tuple[GraderSpec, ...] = reference_turn.graders
        if not specs and reference_turn.expected_answer is not None:
            specs = (_default_spec(default_grader),)
        self.specs = specs
        self.graded = bool(specs)
        self.expected = reference_turn.expected_answer
        self.threshold = threshold
        self.judge = judge
        self.graders = tuple(_grader_or_none(s) for s in specs)
        # A spec that fails to build is an error result, produced without awaiting.
        self.needs_loop = any(g is not None and g.needs_loop for g in self.graders)
        self.uses_tool_results = any(g is None or g.uses_tool_results for g in self.graders)
        self.missing = _missing(specs, threshold) if specs else _NOT_GRADED
        # Single-grader turns: verdict object → answer, keyed by identity (deterministic
        # graders hand back the same prebuilt Verdict for the same outcome).
        self._memo: dict[int, tuple[Verdict, TurnAnswer]] = {}

    def _input(self, query: str | None, answer: str, tool_results: Sequence[Any]) -> GradeInput:
        # tuple.__new__ skips the NamedTuple's Python-level __new__ (all fields given)
        return _new_tuple(
            GradeInput,
            (query, answer, self.expected, self.threshold, tuple(tool_results), self.judge),
        )

    def grade_sync(
        self, query: str | None, answer: str | None, tool_results: Sequence[Any] = ()
    ) -> TurnAnswer:
        """Grade without an event loop (only when `needs_loop` is False). Raises
        `NeedsEventLoop` if a grader that promised not to suspend does."""
        if not self.graded:
            return _NOT_GRADED
        if answer is None:
            return self.missing
        try:
            inp = self._input(query, answer, tool_results)
            specs, graders = self.specs, self.graders
            if len(specs) != 1:
                results = [_run_one_sync(s, g, inp) for s, g in zip(specs, graders, strict=True)]
                return _combine(specs, results, self.threshold)
            grader = graders[0]
            if grader is None:
                return _combine(specs, [_run_one_sync(specs[0], None, inp)], self.threshold)
            try:
                verdict = grader.grade_sync(inp)
            except NeedsEventLoop:
                raise
            except GraderConfigError as exc:
                return _combine(specs, [_result(grader.name, None, None, str(exc))], self.threshold)
            except Exception as exc:  # a grader bug must not take the whole evaluation down
                err = f"{type(exc).__name__}: {exc}"
                return _combine(specs, [_result(grader.name, None, None, err)], self.threshold)
            memo = self._memo
            hit = memo.get(id(verdict))
            if hit is not None and hit[0] is verdict:
                return hit[1]
            out = _combine(specs, [_from_verdict(grader.name, verdict)], self.threshold)
            if len(memo) >= _MEMO_LIMIT:
                memo.clear()
            memo[id(verdict)] = (verdict, out)
            return out
        except NeedsEventLoop:
            raise
        except Exception as exc:  # grading reports errors itself; this is a backstop
            return TurnAnswer(None, None, f"{type(exc).__name__}: {exc}", ())

    async def grade(
        self, query: str | None, answer: str | None, tool_results: Sequence[Any] = ()
    ) -> TurnAnswer:
        """Grade inside an event loop: graders that need one are awaited (concurrently
        when a turn has several); the others run without suspending."""
        if not self.graded:
            return _NOT_GRADED
        if answer is None:
            return self.missing
        inp = self._input(query, answer, tool_results)
        specs = self.specs
        if len(specs) > 1 and self.needs_loop:
            results = list(await asyncio.gather(*(_run_one(s, inp) for s in specs)))
        else:
            # Sequentially, without touching the event loop: deterministic graders never
            # suspend, so this coroutine can be driven to completion with `send(None)`.
            results = [await _run_one(s, inp) for s in specs]
        return _combine(specs, results, self.threshold)


async def grade_answer(
    reference_turn: ReferenceTurn,
    *,
    query: str | None,
    answer: str | None,
    threshold: float,
    default_grader: str = DEFAULT_GRADER,
    judge: LLMJudge | None = None,
    tool_results: Sequence[Any] = (),
) -> AnswerResult:
    """Grade `answer` against `reference_turn` (see the module docstring for the rules).

    `judge` is required only by `llm` graders (an `llm` grader without one is an error
    result). `tool_results` are the turn's tool results, offered to the judge as context.
    """
    specs: Sequence[GraderSpec] = reference_turn.graders
    if not specs:
        if reference_turn.expected_answer is None:
            return NOT_GRADED
        specs = (_default_spec(default_grader),)
    if answer is None:
        return _public(_missing(specs, threshold))
    plan = TurnGrading(
        reference_turn, threshold=threshold, default_grader=default_grader, judge=judge
    )
    return _public(await plan.grade(query, answer, tool_results))
