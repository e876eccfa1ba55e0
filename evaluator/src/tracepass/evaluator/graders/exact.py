"""`exact`: the normalized answer equals the normalized expected answer."""

from __future__ import annotations

from pydantic import Field

from tracepass.evaluator.graders.base import GradeInput, Grader, GraderOptions, Verdict
from tracepass.evaluator.graders.text import Normalization, normalize


class ExactOptions(GraderOptions):
    # `expected` overrides the turn's expected_answer (e.g. to grade against a short
    # canonical form while expected_answer keeps the full prose for the judge).
    expected: str | None = None
    nfkc: bool = True
    casefold: bool = False
    strip_punctuation: bool = False
    whitespace: bool = True
    # Extra accepted answers, any of which counts as a match.
    alternatives: tuple[str, ...] = Field(default=())


class ExactGrader(Grader[ExactOptions]):
    type_name = "exact"
    options_model = ExactOptions
    needs_loop = False

    def __init__(self, options: ExactOptions) -> None:
        super().__init__(options)
        self._norm = Normalization(
            nfkc=options.nfkc,
            casefold=options.casefold,
            strip_punctuation=options.strip_punctuation,
            whitespace=options.whitespace,
        )

    async def grade(self, inp: GradeInput) -> Verdict:
        expected = self.options.expected if self.options.expected is not None else inp.expected
        if expected is None and not self.options.alternatives:
            return Verdict.fail("no expected answer: set expected_answer or the 'expected' option")
        targets = ([expected] if expected is not None else []) + list(self.options.alternatives)
        got = normalize(inp.answer, self._norm)
        for target in targets:
            if got == normalize(target, self._norm):
                return Verdict.ok(1.0, True, f"answer equals {target!r} after normalization")
        return Verdict.ok(0.0, False, f"answer differs from {targets[0]!r} after normalization")
