"""Bound the label values that reach Prometheus.

Agent names and versions come from untrusted span attributes: a client that stamps a
fresh version on every request would otherwise create an unbounded number of series
(and rolling windows). Each label keeps the first `limit` distinct values it sees;
later new values collapse to `other`, and every collapse is counted
(`tracepass_label_overflow_total{label}`) so the loss is visible, never silent.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable

from opentelemetry.metrics import Counter

__all__ = ["MISSING", "OTHER", "LabelLimiter"]

OTHER = "other"
MISSING = "unknown"
_log = logging.getLogger(__name__)


class LabelLimiter:
    def __init__(self, limit: int, overflow: Counter | None = None) -> None:
        if limit < 1:
            raise ValueError(f"label_limit must be >= 1, got {limit}")
        self.limit = limit
        self._overflow = overflow
        self._seen: dict[str, set[str]] = {}
        self._warned: set[str] = set()
        self._lock = threading.Lock()

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

    def distinct(self, label: str) -> int:
        return len(self._seen.get(label, ()))
