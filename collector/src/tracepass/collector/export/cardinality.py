"""Bound the label values that reach Prometheus.

Agent names and versions come from untrusted span attributes: a client that stamps a
fresh version on every request would otherwise create an unbounded number of series
(and rolling windows). Each label keeps the first `limit` distinct values it sees;
later new values collapse to `other`, and every collapse is counted
(`tracepass_label_overflow_total{label}`) so the loss is visible, never silent.

Bounding each label alone is not enough: 50 agents × 50 versions is 2,500 label sets
(60k series, a 14 MB scrape) although neither label passes 50. `combination` bounds the
label *sets* too: at most `limit` distinct combinations (series per metric family, per
outcome); a new one beyond that is folded, least telling label first (agent_version,
then reference_set, then agent_name), into the first folded set already admitted, and
at worst into the all-`other` set, which is always admitted. Each fold is counted under
`label="combination"`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from typing import TypeVar, cast

from opentelemetry.metrics import Counter

__all__ = ["COMBINATION", "MISSING", "OTHER", "LabelLimiter"]

OTHER = "other"
COMBINATION = "combination"  # the `label` value counting folded label sets
MISSING = "unknown"
_log = logging.getLogger(__name__)
_Labels = TypeVar("_Labels", bound=tuple[str, ...])


class LabelLimiter:
    def __init__(self, limit: int, overflow: Counter | None = None) -> None:
        if limit < 1:
            raise ValueError(f"label_limit must be >= 1, got {limit}")
        self.limit = limit
        self._overflow = overflow
        self._seen: dict[str, set[str]] = {}
        self._warned: set[str] = set()
        self._lock = threading.Lock()
        self._combinations: set[tuple[str, ...]] = set()

    def seed(self, label: str, values: Iterable[str]) -> None:
        """Admit values known from persisted state first, so a restart keeps them."""
        for v in values:
            if v not in (OTHER, MISSING):
                self(label, v, count=False)

    def __call__(self, label: str, value: str | None, *, count: bool = True) -> str:
        if value is None or value == "":
            return MISSING
        if value in (OTHER, MISSING):
            return value
        seen_already = self._seen.get(label)
        if seen_already is not None and value in seen_already:
            return value  # admitted values stay admitted: no lock needed to read
        with self._lock:
            seen = self._seen.setdefault(label, set())
            if value in seen:
                return value
            if len(seen) < self.limit:
                seen.add(value)
                return value
            first = label not in self._warned
            self._warned.add(label)
        if count and self._overflow is not None:
            self._overflow.add(1, {"label": label})
        if first:
            _log.warning(
                "label %s exceeded %d distinct values; further new values export as %r",
                label,
                self.limit,
                OTHER,
            )
        return OTHER

    def combination(self, values: _Labels, *, count: bool = True) -> _Labels:
        """`values` (already bounded one by one, in label order: agent_name, agent_version,
        reference_set) if that label set is admitted or fits the limit; else its fold."""
        if values in self._combinations:
            return values  # admitted sets stay admitted: no lock needed to read
        with self._lock:
            folded = values
            for candidate in cast(list[_Labels], _folds(values)):
                if candidate in self._combinations:
                    folded = candidate
                    break
                if len(self._combinations) < self.limit or all(v == OTHER for v in candidate):
                    self._combinations.add(candidate)
                    folded = candidate
                    break
            first = folded != values and COMBINATION not in self._warned
            if first:
                self._warned.add(COMBINATION)
        if folded != values:
            if count and self._overflow is not None:
                self._overflow.add(1, {"label": COMBINATION})
            if first:
                _log.warning(
                    "label combinations exceeded %d distinct sets; further new sets are folded "
                    "into %r",
                    self.limit,
                    OTHER,
                )
        return folded


def _folds(values: tuple[str, ...]) -> list[tuple[str, ...]]:
    """`values`, then with its labels replaced by `other` one more at a time: the
    second label first (agent_version), then the third, then the first, … ."""
    order = [*list(range(1, len(values))), 0]
    out = [values]
    current = list(values)
    for i in order:
        current[i] = OTHER
        out.append(tuple(current))
    return out
