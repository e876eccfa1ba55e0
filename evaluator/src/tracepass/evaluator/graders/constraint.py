"""`constraint`: the answer's shape — length, word count, format.

Each configured check counts once; score = checks satisfied / checks configured and
passed = all satisfied. Length is counted in Unicode code points of the answer with
surrounding whitespace stripped; words are whitespace-separated tokens.
Formats: `json` (the stripped answer parses as JSON, bare — fences do not count),
`one-line` (no line break inside the stripped answer), `regex` (`pattern` fullmatches
the stripped answer).
"""

from __future__ import annotations

import json
import re
from typing import Literal

from pydantic import Field, model_validator

from tracepass.evaluator.graders.base import GradeInput, Grader, GraderOptions, Verdict


class ConstraintOptions(GraderOptions):
    min_length: int | None = Field(default=None, ge=0)
    max_length: int | None = Field(default=None, ge=0)
    min_words: int | None = Field(default=None, ge=0)
    max_words: int | None = Field(default=None, ge=0)
    format: Literal["json", "one-line", "regex"] | None = None
    pattern: str | None = None

    @model_validator(mode="after")
    def _consistent(self) -> ConstraintOptions:
        if all(
            v is None
            for v in (self.min_length, self.max_length, self.min_words, self.max_words, self.format)
        ):
            raise ValueError(
                "set at least one of min_length, max_length, min_words, max_words, format"
            )
        for lo, hi, name in (
            (self.min_length, self.max_length, "length"),
            (self.min_words, self.max_words, "words"),
        ):
            if lo is not None and hi is not None and lo > hi:
                raise ValueError(f"min_{name} ({lo}) is greater than max_{name} ({hi})")
        if (self.format == "regex") != (self.pattern is not None):
            raise ValueError("'pattern' is required with format: regex and only allowed with it")
        return self


class ConstraintGrader(Grader[ConstraintOptions]):
    type_name = "constraint"
    options_model = ConstraintOptions
    needs_loop = False
    uses_tool_results = False

    def __init__(self, options: ConstraintOptions) -> None:
        super().__init__(options)
        self._pattern: re.Pattern[str] | None = None
        if options.pattern is not None:
            try:
                self._pattern = re.compile(options.pattern)
            except re.error as exc:
                raise ValueError(f"invalid regular expression {options.pattern!r}: {exc}") from None

    async def grade(self, inp: GradeInput) -> Verdict:
        return self.grade_sync(inp)

    def grade_sync(self, inp: GradeInput) -> Verdict:
        o = self.options
        text = inp.answer.strip()
        n_chars = len(text)
        n_words = len(text.split())
        checks: list[tuple[bool, str]] = []
        if o.min_length is not None:
            checks.append((n_chars >= o.min_length, f"length {n_chars} >= {o.min_length}"))
        if o.max_length is not None:
            checks.append((n_chars <= o.max_length, f"length {n_chars} <= {o.max_length}"))
        if o.min_words is not None:
            checks.append((n_words >= o.min_words, f"words {n_words} >= {o.min_words}"))
        if o.max_words is not None:
            checks.append((n_words <= o.max_words, f"words {n_words} <= {o.max_words}"))
        if o.format == "json":
            try:
                json.loads(text)
                checks.append((True, "is JSON"))
            except ValueError:
                checks.append((False, "is JSON"))
        elif o.format == "one-line":
            checks.append(("\n" not in text and "\r" not in text, "is one line"))
        elif o.format == "regex" and self._pattern is not None:
            ok = self._pattern.fullmatch(text) is not None
            checks.append((ok, f"matches {self._pattern.pattern!r}"))
        failed = [desc for ok, desc in checks if not ok]
        n_ok = len(checks) - len(failed)
        reason = f"{n_ok}/{len(checks)} constraints hold" + (
            f"; failed: {', '.join(failed)}" if failed else ""
        )
        return Verdict.ok(n_ok / len(checks), not failed, reason)
