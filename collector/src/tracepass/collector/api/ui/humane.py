"""Figures as a person reads them: money in plain dollars, durations in µs, ms or s.

Python's `g` format turns a small cost into `6.15225e-05`; nobody reads a bill that way
(issue 40 item 6). Both the UI pages and the HTML report format through here so one
cost reads the same everywhere.
"""

from __future__ import annotations

import math

_MAX_DECIMALS = 12


def _fixed(value: float, significant: int, min_decimals: int = 0) -> str:
    """`value` (≥ 0) in fixed point with about `significant` digits, never an exponent."""
    if value == 0:
        return "0"
    decimals = significant - 1 - math.floor(math.log10(value))
    decimals = min(max(decimals, min_decimals), _MAX_DECIMALS)
    text = f"{value:,.{decimals}f}"
    if "." in text:
        whole, frac = text.split(".")
        frac = frac.rstrip("0").ljust(min_decimals, "0")
        text = f"{whole}.{frac}" if frac else whole
    return text


def usd(value: float | None, unknown: str = "—") -> str:
    """A cost in dollars: `$0.000048`, `$0.42`, `$1,234.50` (three significant digits
    below a dollar, cents above; `unknown` for a cost nobody could price)."""
    if value is None or math.isnan(value):
        return unknown
    sign = "-" if value < 0 else ""
    v = abs(value)
    if v >= 1:
        return f"{sign}${v:,.2f}"
    text = _fixed(v, 3, min_decimals=2)
    if float(text.replace(",", "")) == 0:
        return "$0"
    return f"{sign}${text}"


def duration(seconds: float | None, unknown: str = "—") -> str:
    """A duration in µs, ms or s with three significant digits: `48 µs`, `1.5 ms`, `2.31 s`."""
    if seconds is None or math.isnan(seconds):
        return unknown
    sign = "-" if seconds < 0 else ""
    s = abs(seconds)
    if s == 0:
        return "0 s"
    if s < 0.0009995:
        return f"{sign}{_fixed(s * 1e6, 3)} µs"
    if s < 0.9995:
        return f"{sign}{_fixed(s * 1e3, 3)} ms"
    if s < 1000:
        return f"{sign}{_fixed(s, 3)} s"
    return f"{sign}{s:,.0f} s"
