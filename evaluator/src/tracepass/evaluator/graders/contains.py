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
from typing import Literal

from pydantic import Field

from tracepass.evaluator.graders.base import GradeInput, Grader, GraderOptions, Verdict
from tracepass.evaluator.graders.text import Normalization, normalize

_SPLIT = re.compile(r"[;|\n]")
_KW_CACHE_LIMIT = 4096
_MISS = object()


class ContainsOptions(GraderOptions):
    keywords: tuple[str, ...] | None = Field(default=None, min_length=1)
    mode: Literal["all", "any"] = "all"
    split_expected: bool = False
    # Match keywords only at word boundaries ("cat" does not match "concatenate").
    whole_words: bool = False
    nfkc: bool = True
    casefold: bool = True
    strip_punctuation: bool = False
    whitespace: bool = True


class ContainsGrader(Grader[ContainsOptions]):
    type_name = "contains"
    options_model = ContainsOptions
    needs_loop = False

    def __init__(self, options: ContainsOptions) -> None:
        super().__init__(options)
        self._norm = Normalization(
            nfkc=options.nfkc,
            casefold=options.casefold,
            strip_punctuation=options.strip_punctuation,
            whitespace=options.whitespace,
        )
        self._kw_cache: dict[str | None, list[str] | None] = {}

    def _keywords(self, expected: str | None) -> list[str] | None:
        # Memoized: the default grader's spec object is shared by every turn, but a turn's
        # expected answer is graded over and over (k trials, many conversations).
        key = None if self.options.keywords is not None else expected
        hit = self._kw_cache.get(key, _MISS)
        if hit is not _MISS:
            return hit  # type: ignore[return-value]
        kws = self._derive(expected)
        if len(self._kw_cache) >= _KW_CACHE_LIMIT:
            self._kw_cache.clear()
        self._kw_cache[key] = kws
        return kws

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

    def _found(self, keyword: str, text: str) -> bool:
        if self.options.whole_words:
            return re.search(rf"(?<!\w){re.escape(keyword)}(?!\w)", text) is not None
        return keyword in text

    async def grade(self, inp: GradeInput) -> Verdict:
        keywords = self._keywords(inp.expected)
        if keywords is None:
            return Verdict.fail("no keywords: set the 'keywords' option or expected_answer")
        if not keywords:
            return Verdict.fail("keywords are empty after normalization")
        text = normalize(inp.answer, self._norm)
        found: list[str] = []
        missing: list[str] = []
        for k in keywords:
            (found if self._found(k, text) else missing).append(k)
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
