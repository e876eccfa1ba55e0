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

A missing answer (the agent produced none) is a failure, not an error: every grader
gets score 0.0 / failed without running, because "no answer" is a wrong answer whatever
the grader would check.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from tracepass.evaluator.graders.base import GradeInput, GraderConfigError, Verdict
from tracepass.evaluator.graders.registry import cached_grader, display_name
from tracepass.evaluator.models import GraderResult, GraderSpec, ReferenceTurn

if TYPE_CHECKING:
    from tracepass.evaluator.judge import LLMJudge

__all__ = ["SCORE_TOLERANCE", "AnswerResult", "grade_answer"]

SCORE_TOLERANCE = 1e-9
_default_specs: dict[str, GraderSpec] = {}


class AnswerResult(BaseModel):
    """The combined verdict on one turn's answer (see the module docstring)."""

    model_config = ConfigDict(frozen=True)

    score: float | None
    correct: bool | None
    error: str | None
    graders: tuple[GraderResult, ...]


NOT_GRADED = AnswerResult(score=None, correct=None, error=None, graders=())


def _default_spec(type_name: str) -> GraderSpec:
    # One spec object per default type, so the grader cache keyed by spec identity hits.
    spec = _default_specs.get(type_name)
    if spec is None:
        spec = _default_specs[type_name] = GraderSpec(type=type_name)
    return spec


def _needs_loop(spec: GraderSpec) -> bool:
    try:
        return cached_grader(spec).needs_loop
    except GraderConfigError:
        return False  # reported as an error result by _run_one, without awaiting


def _result(
    name: str,
    score: float | None,
    passed: bool | None,
    error: str | None = None,
    reasoning: str | None = None,
) -> GraderResult:
    # Plain validated construction: pydantic-core's validator is faster here than
    # model_construct's Python loop (measured).
    return GraderResult(grader=name, score=score, passed=passed, error=error, reasoning=reasoning)


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
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # a grader bug must not take the whole evaluation down
        return _result(name, None, None, f"{type(exc).__name__}: {exc}")
    if verdict.error is not None or verdict.score is None or verdict.passed is None:
        return _result(
            name, None, None, verdict.error or "grader returned no score", verdict.reasoning
        )
    return _result(name, verdict.score, verdict.passed, None, verdict.reasoning)


def _answer(
    score: float | None, correct: bool | None, error: str | None, graders: tuple[GraderResult, ...]
) -> AnswerResult:
    return AnswerResult(score=score, correct=correct, error=error, graders=graders)


def combine(
    specs: Sequence[GraderSpec], results: Sequence[GraderResult], threshold: float
) -> AnswerResult:
    """Combine per-grader results by the rules in the module docstring."""
    if len(results) == 1:  # the common case, without the generic machinery
        r = results[0]
        if r.error is not None:
            return _answer(None, None, f"{r.grader}: {r.error}", (r,))
        score = r.score if r.score is not None else 0.0
        return _answer(score, bool(r.passed) and score >= threshold - SCORE_TOLERANCE, None, (r,))
    errors = [f"{r.grader}: {r.error}" for r in results if r.error is not None]
    if errors:
        return _answer(None, None, "; ".join(errors), tuple(results))
    total_w = sum(s.weight for s in specs)
    score = sum(s.weight * (r.score or 0.0) for s, r in zip(specs, results, strict=True)) / total_w
    score = min(1.0, max(0.0, score))
    correct = all(r.passed for r in results) and score >= threshold - SCORE_TOLERANCE
    return _answer(score, correct, None, tuple(results))


async def grade_answer(
    reference_turn: ReferenceTurn,
    *,
    query: str | None,
    answer: str | None,
    threshold: float,
    default_grader: str = "contains",
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
        results = [
            _result(display_name(s), 0.0, False, None, "the turn has no answer") for s in specs
        ]
        return combine(specs, results, threshold)
    inp = GradeInput(
        query=query,
        answer=answer,
        expected=reference_turn.expected_answer,
        threshold=threshold,
        tool_results=tuple(tool_results),
        judge=judge,
    )
    if len(specs) > 1 and any(_needs_loop(s) for s in specs):
        results = list(await asyncio.gather(*(_run_one(s, inp) for s in specs)))
    else:
        # Sequentially, without touching the event loop: deterministic graders never
        # suspend, so this coroutine can be driven to completion with `send(None)`.
        results = [await _run_one(s, inp) for s in specs]
    return combine(specs, results, threshold)
