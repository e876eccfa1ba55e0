"""Text normalization shared by the string graders (`exact`, `contains`, `regex`).

Normalization happens in a fixed order so options compose predictably:
NFKC → casefold → punctuation removal → whitespace collapsing. NFKC first so that
compatibility characters (full-width digits, ligatures, non-breaking spaces) are plain
before the later steps look at them; punctuation before whitespace so that removing
the dash of "a - b" does not leave a double space. Punctuation is deleted, not replaced by
a space (as in SQuAD's answer normalization): "1,200" → "1200", "don't" → "dont".
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable

from pydantic import BaseModel, ConfigDict

from tracepass.evaluator.graders.base import GraderOptions


class Normalization(BaseModel):
    """Normalization switches; each grader chooses its own defaults."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    nfkc: bool = True
    casefold: bool = False
    strip_punctuation: bool = False
    whitespace: bool = True


class NormalizingOptions(GraderOptions):
    """Grader options that carry the normalization switches, so every string grader
    spells them (and validates them) the same way; a grader changes a default by
    redeclaring the field."""

    nfkc: bool = True
    casefold: bool = False
    strip_punctuation: bool = False
    whitespace: bool = True

    def normalization(self) -> Normalization:
        return Normalization(
            nfkc=self.nfkc,
            casefold=self.casefold,
            strip_punctuation=self.strip_punctuation,
            whitespace=self.whitespace,
        )


def _is_punct(ch: str) -> bool:
    # Unicode categories P* (punctuation) and S* (symbols such as $, %, +) both count:
    # "$1,200" vs "1200" is the case users mean when they ask for punctuation stripping.
    return unicodedata.category(ch)[0] in ("P", "S")


def normalize(text: str, opts: Normalization) -> str:
    if opts.nfkc and not text.isascii():  # ASCII is already NFKC-normal
        text = unicodedata.normalize("NFKC", text)
    if opts.casefold:
        text = text.casefold()
    if opts.strip_punctuation:
        text = "".join(ch for ch in text if not _is_punct(ch))
    if opts.whitespace:
        text = " ".join(text.split())
    return text


def normalizer(opts: Normalization) -> Callable[[str], str]:
    """`normalize` with `opts` bound, specialised for the common option sets: graders
    normalize every answer they see, and the generic version re-reads four switches
    per call."""
    nfkc, casefold = opts.nfkc, opts.casefold
    if opts.strip_punctuation or not opts.whitespace:
        return lambda text: normalize(text, opts)
    if nfkc and casefold:

        def fold_nfkc(text: str) -> str:
            if not text.isascii():
                text = unicodedata.normalize("NFKC", text)
            return " ".join(text.casefold().split())

        return fold_nfkc
    if nfkc:

        def plain_nfkc(text: str) -> str:
            if not text.isascii():
                text = unicodedata.normalize("NFKC", text)
            return " ".join(text.split())

        return plain_nfkc
    if casefold:
        return lambda text: " ".join(text.casefold().split())
    return lambda text: " ".join(text.split())
