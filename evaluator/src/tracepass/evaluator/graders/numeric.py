"""`numeric`: the numbers the reference expects appear in the answer, within tolerance.

Expected numbers come from the `expected` option (a number or a list) or, by default,
from every number found in `expected_answer`. Each expected number must be matched by a
*different* number in the answer (a maximum bipartite matching, so one "42" in the answer
cannot satisfy two expected 42s). Score = matched / expected; passed = all matched
(`mode: any`: passed and score 1.0 when at least one matches).

Tolerance is `|a − e| ≤ max(abs_tol, rel_tol·|e|)` (like `math.isclose`, but relative to
the expected value only, so the test is not symmetric in a wrong answer's favour).

Percentages: `percent: both` (default) lets "45%" in the answer match 45 or 0.45;
`as_written` only 45; `fraction` only 0.45.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tracepass.evaluator.graders.base import GradeInput, Grader, GraderOptions, Verdict
from tracepass.evaluator.graders.numbers import FoundNumber, find_numbers
from tracepass.evaluator.vocabulary import GRADER_NUMERIC


class NumericOptions(GraderOptions):
    expected: float | tuple[float, ...] | None = None
    abs_tol: float = Field(default=0.0, ge=0)
    rel_tol: float = Field(default=1e-9, ge=0)
    mode: Literal["all", "any"] = "all"
    percent: Literal["both", "as_written", "fraction"] = "both"


def _candidates(n: FoundNumber, percent: str) -> tuple[float, ...]:
    if not n.percent or percent == "as_written":
        return (n.value,)
    if percent == "fraction":
        return (n.value / 100.0,)
    return (n.value, n.value / 100.0)


def _max_matching(adj: list[list[int]], n_right: int) -> int:
    """Size of a maximum bipartite matching (Kuhn's augmenting paths; inputs are tiny)."""
    owner = [-1] * n_right

    def augment(u: int, seen: list[bool]) -> bool:
        for v in adj[u]:
            if not seen[v]:
                seen[v] = True
                if owner[v] == -1 or augment(owner[v], seen):
                    owner[v] = u
                    return True
        return False

    return sum(augment(u, [False] * n_right) for u in range(len(adj)))


class NumericGrader(Grader[NumericOptions]):
    type_name = GRADER_NUMERIC
    options_model = NumericOptions
    needs_loop = False
    uses_tool_results = False

    def _close(self, actual: float, expected: float) -> bool:
        tol = max(self.options.abs_tol, self.options.rel_tol * abs(expected))
        return abs(actual - expected) <= tol

    async def grade(self, inp: GradeInput) -> Verdict:
        return self.grade_sync(inp)

    def grade_sync(self, inp: GradeInput) -> Verdict:
        opt = self.options
        if opt.expected is not None:
            expected = [opt.expected] if isinstance(opt.expected, float) else list(opt.expected)
        elif inp.expected is not None:
            expected = [n.value for n in find_numbers(inp.expected)]
        else:
            expected = []
        if not expected:
            return Verdict.fail(
                "no expected numbers: set the 'expected' option or an expected_answer "
                "containing numbers"
            )
        found = find_numbers(inp.answer)
        adj = [
            [
                j
                for j, n in enumerate(found)
                if any(self._close(c, e) for c in _candidates(n, opt.percent))
            ]
            for e in expected
        ]
        matched = _max_matching(adj, len(found))
        if opt.mode == "any":
            ok = any(adj)
            score = 1.0 if ok else 0.0
        else:
            ok = matched == len(expected)
            score = matched / len(expected)
        seen = [n.text.strip() for n in found]
        reason = (
            f"matched {matched}/{len(expected)} expected numbers {expected!r}; answer has {seen!r}"
        )
        return Verdict.ok(score, ok, reason)
