"""`regex`: the answer matches one or more regular expressions (Python `re` syntax).

Patterns come from reference files, which are trusted configuration; they are compiled
once when the grader is built so a broken pattern is reported at load time.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Literal

from pydantic import model_validator

from tracepass.evaluator.graders.base import GradeInput, Grader, GraderOptions, Verdict


class RegexOptions(GraderOptions):
    pattern: str | None = None
    patterns: tuple[str, ...] = ()
    mode: Literal["all", "any"] = "all"
    # search: anywhere in the answer; fullmatch: the whole (stripped) answer.
    match: Literal["search", "fullmatch"] = "search"
    ignorecase: bool = False
    multiline: bool = False
    dotall: bool = False
    # Pass when the pattern(s) do NOT match (e.g. the answer must not leak "Traceback").
    negate: bool = False
    # The same switch spelled positively, as policies write it: `must_match: false` is
    # `negate: true`. Setting both to disagreeing values is an error.
    must_match: bool | None = None
    nfkc: bool = True

    @model_validator(mode="after")
    def _need_pattern(self) -> RegexOptions:
        if self.pattern is None and not self.patterns:
            raise ValueError("set 'pattern' or 'patterns'")
        if self.must_match is not None:
            if "negate" in self.model_fields_set and self.negate == self.must_match:
                raise ValueError("'must_match' and 'negate' contradict each other")
            object.__setattr__(self, "negate", not self.must_match)
        return self


class RegexGrader(Grader[RegexOptions]):
    type_name = "regex"
    options_model = RegexOptions
    needs_loop = False
    uses_tool_results = False

    def __init__(self, options: RegexOptions) -> None:
        super().__init__(options)
        flags = (
            (re.IGNORECASE if options.ignorecase else 0)
            | (re.MULTILINE if options.multiline else 0)
            | (re.DOTALL if options.dotall else 0)
        )
        sources = ([options.pattern] if options.pattern is not None else []) + list(
            options.patterns
        )
        self._compiled: list[re.Pattern[str]] = []
        for src in sources:
            try:
                self._compiled.append(re.compile(src, flags))
            except re.error as exc:
                raise ValueError(f"invalid regular expression {src!r}: {exc}") from None

    async def grade(self, inp: GradeInput) -> Verdict:
        return self.grade_sync(inp)

    def grade_sync(self, inp: GradeInput) -> Verdict:
        text = unicodedata.normalize("NFKC", inp.answer) if self.options.nfkc else inp.answer
        if self.options.match == "fullmatch":
            text = text.strip()
            hits = [p.fullmatch(text) is not None for p in self._compiled]
        else:
            hits = [p.search(text) is not None for p in self._compiled]
        if self.options.negate:
            hits = [not h for h in hits]
        n_ok = sum(hits)
        if self.options.mode == "any":
            ok = n_ok > 0
            score = 1.0 if ok else 0.0
        else:
            ok = n_ok == len(hits)
            score = n_ok / len(hits)
        failed = [p.pattern for p, h in zip(self._compiled, hits, strict=True) if not h]
        verb = "must not match" if self.options.negate else "did not match"
        reason = f"{n_ok}/{len(hits)} patterns satisfied" + (
            f"; {verb}: {failed!r}" if failed else ""
        )
        return Verdict.ok(score, ok, reason)
