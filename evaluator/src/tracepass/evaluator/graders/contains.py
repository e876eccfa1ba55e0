"""`contains`: the answer contains the keywords (all of them, or any one).

Default keywords (no `keywords` option): the expected answer itself as one phrase, i.e.
"the answer contains the expected answer" after normalization. A phrase is safer than
splitting the expected answer into words: splitting "not approved" into "not" and
"approved" would let "approved, not denied" pass. With `split_expected: true` the
expected answer is split on `;`, `|` and newlines into several phrases instead, for
references written as "Paris; 2.1 million".
"""

from __future__ import annotations

import re
from typing import Literal, NamedTuple

from pydantic import Field

from tracepass.evaluator.graders.base import GradeInput, Grader, Verdict
from tracepass.evaluator.graders.text import NormalizingOptions, normalize, normalizer
from tracepass.evaluator.vocabulary import GRADER_CONTAINS

_SPLIT = re.compile(r"[;|\n]")
_KW_CACHE_LIMIT = 4096
_MISS = object()


class ContainsOptions(NormalizingOptions):
    keywords: tuple[str, ...] | None = Field(default=None, min_length=1)
    mode: Literal["all", "any"] = "all"
    split_expected: bool = False
    # Match keywords only at word boundaries ("cat" does not match "concatenate").
    whole_words: bool = False
    casefold: bool = True  # keywords match regardless of case


class ContainsGrader(Grader[ContainsOptions]):
    type_name = GRADER_CONTAINS
    options_model = ContainsOptions
    needs_loop = False
    uses_tool_results = False

    def __init__(self, options: ContainsOptions) -> None:
        super().__init__(options)
        self._norm = options.normalization()
        self._normalize = normalizer(self._norm)
        self._kw_cache: dict[str | None, _Keywords | None] = {}

    def _keywords(self, expected: str | None) -> _Keywords | None:
        # Memoized: the default grader's spec object is shared by every turn, but a turn's
        # expected answer is graded over and over (k trials, many conversations).
        key = None if self.options.keywords is not None else expected
        hit = self._kw_cache.get(key, _MISS)
        if hit is not _MISS:
            return hit  # type: ignore[return-value]
        kws = self._derive(expected)
        if len(self._kw_cache) >= _KW_CACHE_LIMIT:
            self._kw_cache.clear()
        self._kw_cache[key] = compiled = None if kws is None else self._prepare(kws)
        return compiled

    def _derive(self, expected: str | None) -> list[str] | None:
        if self.options.keywords is not None:
            raw = list(self.options.keywords)
        elif expected is None:
            return None
        elif self.options.split_expected:
            raw = _SPLIT.split(expected)
        else:
            raw = [expected]
        kws = [normalize(k, self._norm) for k in raw]
        return [k for k in kws if k]

    def _prepare(self, keywords: list[str]) -> _Keywords:
        patterns = (
            [re.compile(rf"(?<!\w){re.escape(k)}(?!\w)") for k in keywords]
            if self.options.whole_words
            else None
        )
        if len(keywords) != 1:
            return _Keywords(keywords, patterns, None, None)
        # the usual case, one phrase: both possible verdicts, built once
        hit = self._verdict(keywords, [keywords[0]], [])
        miss = self._verdict(keywords, [], [keywords[0]])
        return _Keywords(keywords, patterns, hit, miss)

    def _verdict(self, keywords: list[str], found: list[str], missing: list[str]) -> Verdict:
        if self.options.mode == "any":
            ok = bool(found)
            score = 1.0 if ok else 0.0
        else:
            score = len(found) / len(keywords)
            ok = not missing
        reason = f"found {len(found)}/{len(keywords)} keywords" + (
            f"; missing {missing!r}" if missing else ""
        )
        return Verdict.ok(score, ok, reason)

    async def grade(self, inp: GradeInput) -> Verdict:
        return self.grade_sync(inp)

    def grade_sync(self, inp: GradeInput) -> Verdict:
        compiled = self._keywords(inp.expected)
        if compiled is None:
            return Verdict.fail("no keywords: set the 'keywords' option or expected_answer")
        keywords = compiled.keywords
        if not keywords:
            return Verdict.fail("keywords are empty after normalization")
        text = self._normalize(inp.answer)
        patterns = compiled.patterns
        if compiled.hit is not None and compiled.miss is not None:
            if patterns is None:
                found_it = keywords[0] in text
            else:
                found_it = patterns[0].search(text) is not None
            return compiled.hit if found_it else compiled.miss
        found: list[str] = []
        missing: list[str] = []
        for i, k in enumerate(keywords):
            ok = k in text if patterns is None else patterns[i].search(text) is not None
            (found if ok else missing).append(k)
        return self._verdict(keywords, found, missing)


class _Keywords(NamedTuple):
    """A normalized keyword list with what grading it needs, derived once."""

    keywords: list[str]
    patterns: list[re.Pattern[str]] | None  # whole_words: one boundary regex per keyword
    hit: Verdict | None  # single keyword: the verdicts for found / not found
    miss: Verdict | None
