"""Finding numbers in free text, for the `numeric` grader.

Recognised: optional sign (`-`, `+`, Unicode minus U+2212), integers, decimals
(`32.40`, `.5`), thousands separators in groups of three (`1,234.5`, not `1,2345`),
exponents (`1e3`, `2.5E-4`) and a trailing percent sign (`45%`, `45 %`).
A number glued to a preceding letter or digit is not a number (`x2`, `A12`), and a
hyphen between two numbers is a range, not a sign (`2020-2021` → 2020, 2021).
Not recognised (documented in docs/graders.md): words ("three"), fractions ("1/2" gives
1 and 2), locale decimal commas ("3,5"), hexadecimal.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

_NUM = re.compile(
    r"(?<![\w.])"
    r"(?P<sign>[-+])?"
    r"(?P<num>(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?|\.\d+)"
    r"(?P<exp>[eE][-+]?\d+)?"
    r"(?P<pct>\s?%)?"
)


@dataclass(frozen=True, slots=True)
class FoundNumber:
    value: float
    percent: bool
    text: str


def find_numbers(text: str) -> list[FoundNumber]:
    text = unicodedata.normalize("NFKC", text).replace("\u2212", "-")
    out: list[FoundNumber] = []
    for m in _NUM.finditer(text):
        body = m.group("num").replace(",", "") + (m.group("exp") or "")
        value = float(body)
        if m.group("sign") == "-":
            value = -value
        out.append(FoundNumber(value=value, percent=m.group("pct") is not None, text=m.group(0)))
    return out
