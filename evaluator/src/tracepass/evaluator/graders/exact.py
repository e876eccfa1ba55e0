"""`exact`: the normalized answer equals the normalized expected answer."""

from __future__ import annotations

from typing import NamedTuple

from pydantic import Field

from tracepass.evaluator.graders.base import GradeInput, Grader, Verdict
from tracepass.evaluator.graders.text import NormalizingOptions, normalize, normalizer
from tracepass.evaluator.vocabulary import GRADER_EXACT


class ExactOptions(NormalizingOptions):
    # `expected` overrides the turn's expected_answer (e.g. to grade against a short
    # canonical form while expected_answer keeps the full prose for the judge).
    expected: str | None = None
    # Extra accepted answers, any of which counts as a match.
    alternatives: tuple[str, ...] = Field(default=())


class ExactGrader(Grader[ExactOptions]):
    type_name = GRADER_EXACT
    options_model = ExactOptions
    needs_loop = False
    uses_tool_results = False

    def __init__(self, options: ExactOptions) -> None:
        super().__init__(options)
        self._norm = options.normalization()
        self._normalize = normalizer(self._norm)
        self._targets: dict[str | None, _Targets | None] = {}

    def _compile(self, expected: str | None) -> _Targets | None:
        """The normalized targets for one expected answer and both verdicts for each,
        memoized: a turn's expected answer is graded over and over."""
        hit = self._targets.get(expected, _MISS)
        if hit is not _MISS:
            return hit  # type: ignore[return-value]
        key = expected
        if self.options.expected is not None:
            expected = self.options.expected
        compiled: _Targets | None
        if expected is None and not self.options.alternatives:
            compiled = None
        else:
            targets = ([expected] if expected is not None else []) + list(self.options.alternatives)
            compiled = _Targets(
                tuple(
                    (
                        normalize(t, self._norm),
                        Verdict.ok(1.0, True, f"answer equals {t!r} after normalization"),
                    )
                    for t in targets
                ),
                Verdict.ok(0.0, False, f"answer differs from {targets[0]!r} after normalization"),
            )
        if len(self._targets) >= _CACHE_LIMIT:
            self._targets.clear()
        self._targets[key] = compiled
        return compiled

    async def grade(self, inp: GradeInput) -> Verdict:
        return self.grade_sync(inp)

    def grade_sync(self, inp: GradeInput) -> Verdict:
        compiled = self._compile(inp.expected)
        if compiled is None:
            return Verdict.fail("no expected answer: set expected_answer or the 'expected' option")
        got = self._normalize(inp.answer)
        for normalized, verdict in compiled.targets:
            if got == normalized:
                return verdict
        return compiled.differs


class _Targets(NamedTuple):
    targets: tuple[tuple[str, Verdict], ...]  # (normalized target, its "equals" verdict)
    differs: Verdict


_CACHE_LIMIT = 4096
_MISS = object()
