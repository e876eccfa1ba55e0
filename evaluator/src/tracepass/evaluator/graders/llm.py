"""`llm`: the answer is scored by the LLM judge (`tracepass.evaluator.judge.llm_judge`).

The judge object is supplied at run time (`grade_answer(..., judge=...)`, `--judge` on
the command line), not in the reference file, so the same references work with any
model. Without a judge the grader returns an error result. passed = score ≥ `threshold`
(option; default: the turn's answer threshold). `rubric` gives the judge criteria to
grade by when there is no reference answer (agent policies).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import Field

from tracepass.evaluator.graders.base import GradeInput, Grader, GraderOptions, Verdict
from tracepass.evaluator.vocabulary import GRADER_LLM


class LLMOptions(GraderOptions):
    threshold: float | None = Field(default=None, ge=0, le=1)
    # Give the judge the turn's tool results as context (facts the agent could rely on).
    include_tool_results: bool = True
    max_context_chars: int = Field(default=8000, ge=0)
    # Compare against this text instead of the turn's expected_answer.
    expected: str | None = None
    # What a good answer must satisfy, for reference-free grading (agent policies):
    # given to the judge in its own delimited block, next to (or instead of) a reference.
    rubric: str | None = Field(default=None, min_length=1)


def format_context(tool_results: tuple[Any, ...] | list[Any], limit: int) -> str | None:
    if not tool_results or limit == 0:
        return None
    lines = []
    for i, result in enumerate(tool_results, 1):
        text = (
            result
            if isinstance(result, str)
            else json.dumps(result, ensure_ascii=False, default=str)
        )
        lines.append(f"[tool result {i}] {text}")
    out = "\n".join(lines)
    if len(out) > limit:
        out = out[:limit] + f"\n… ({len(out) - limit} more characters omitted)"
    return out


class LLMGrader(Grader[LLMOptions]):
    type_name = GRADER_LLM
    options_model = LLMOptions

    async def grade(self, inp: GradeInput) -> Verdict:
        if inp.judge is None:
            return Verdict.fail("no LLM judge configured (pass judge=… or --judge module:attr)")
        o = self.options
        context = (
            format_context(list(inp.tool_results), o.max_context_chars)
            if o.include_tool_results
            else None
        )
        expected = o.expected if o.expected is not None else inp.expected
        if o.rubric is None:
            verdict = await inp.judge.judge(inp.query, inp.answer, expected, context)
        else:
            verdict = await inp.judge.judge(
                inp.query, inp.answer, expected, context, criteria=o.rubric
            )
        if verdict.error is not None or verdict.score is None:
            return Verdict(score=None, passed=None, error=verdict.error or "judge gave no score")
        line = o.threshold if o.threshold is not None else inp.threshold
        return Verdict.ok(verdict.score, verdict.score >= line, verdict.reasoning)
