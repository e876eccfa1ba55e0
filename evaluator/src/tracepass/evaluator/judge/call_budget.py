"""A budget of LLM-judge calls: a per-minute token bucket and a per-UTC-day allowance.

Why a budget and not a rate limit that waits: a live collector must not fall behind
because the judge is slow or costly, and a conversation judged late is no better than one
not judged. So a call the budget cannot pay for is refused at once
(`JudgeBudgetExhausted`), and the conversation it belonged to is reported as
`skipped_budget` — no trial, neither pass nor fail — never scored as a failure.

`adaptive_share` is the share of judge-needing conversations that can still be judged if
the remaining daily allowance is to last until midnight UTC at the demand seen so far;
the collector lowers its sampling threshold by it (still by the conversation hash, so the
judged conversations stay an outcome-independent sample).

`usd_per_day` caps the judge's spend in money. A call's real cost is known only once
the provider answered (its reported tokens: `spend.py`), so each call first RESERVES its
estimated cost (`try_reserve`), the call starts only if today's charges plus every
reservation still outstanding plus its own estimate fit under the cap, and once it has
answered its real cost is `charge`d and the reservation `release`d. Concurrent calls
therefore cannot all pass a check that none of them has paid for yet (the third attack
overspent a $0.01 cap 7x that way). The day's spend can exceed the cap only by what
calls in flight cost beyond their estimates (`spend_estimate.py`: the prompt's price, and
never less than the dearest call seen); calls whose cost is unknown (unpriced model)
reserve and charge nothing.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["JudgeBudget", "JudgeBudgetExhausted"]

_DAY_S = 86_400.0


class JudgeBudgetExhausted(RuntimeError):
    """The judge budget cannot pay for this call; the conversation is `skipped_budget`."""


@dataclass
class _DemandRate:
    """Judge-needing conversations per second, exponentially smoothed (half-life 10 min).

    During the first half-life the plain average since the first arrival is used: an
    average smoothed from zero would underestimate demand and overspend the allowance.
    """

    rate: float = 0.0
    first: float | None = None
    last: float | None = None
    count: int = 0
    half_life_s: float = 600.0

    def observe(self, now: float) -> None:
        self.count += 1
        if self.first is None or self.last is None:
            self.first = self.last = now
            return
        if now - self.first <= self.half_life_s:
            self.rate = (self.count - 1) / max(now - self.first, 1e-3)
        else:
            dt = max(now - self.last, 1e-3)
            weight = math.exp(-dt * math.log(2) / self.half_life_s)
            self.rate = weight * self.rate + (1 - weight) / dt
        self.last = now


class JudgeBudget:
    """Thread-safe; `None` limits mean unlimited. Time comes from `clock` (UTC seconds)."""

    def __init__(
        self,
        calls_per_minute: float | None = None,
        calls_per_day: int | None = None,
        *,
        usd_per_day: float | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if calls_per_minute is not None and calls_per_minute <= 0:
            raise ValueError("calls_per_minute must be positive or null")
        if calls_per_day is not None and calls_per_day < 0:
            raise ValueError("calls_per_day must be non-negative or null")
        if usd_per_day is not None and not (usd_per_day >= 0 and math.isfinite(usd_per_day)):
            raise ValueError("usd_per_day must be a non-negative number or null")
        self.usd_per_day = usd_per_day
        self._usd_today = 0.0
        self._usd_reserved = 0.0
        self.calls_per_minute = calls_per_minute
        self.calls_per_day = calls_per_day
        self._clock = clock
        self._lock = threading.Lock()
        now = clock()
        self._tokens = float(calls_per_minute) if calls_per_minute is not None else math.inf
        self._refilled_at = now
        self._day = math.floor(now / _DAY_S)
        self._used_today = 0
        self._demand = _DemandRate()

    @property
    def unlimited(self) -> bool:
        return (
            self.calls_per_minute is None
            and self.calls_per_day is None
            and self.usd_per_day is None
        )

    def _refill(self, now: float) -> None:
        day = math.floor(now / _DAY_S)
        if day != self._day:
            self._day, self._used_today, self._usd_today = day, 0, 0.0
        if self.calls_per_minute is not None:
            elapsed = max(now - self._refilled_at, 0.0)
            self._tokens = min(
                float(self.calls_per_minute), self._tokens + elapsed * self.calls_per_minute / 60
            )
        self._refilled_at = now

    def try_acquire(self) -> bool:
        """Take one call from the budget; False (and nothing taken) when it is spent."""
        return self.try_reserve(0.0)

    def try_reserve(self, usd: float) -> bool:
        """Take one call and reserve its estimated cost `usd` until `release`; False (and
        nothing taken) when the calls are spent or the estimate does not fit under
        `usd_per_day` beside today's charges and the reservations outstanding."""
        usd = usd if usd > 0 and math.isfinite(usd) else 0.0
        with self._lock:
            self._refill(self._clock())
            if self._tokens < 1.0:
                return False
            if self.calls_per_day is not None and self._used_today >= self.calls_per_day:
                return False
            if self.usd_per_day is not None:
                held = self._usd_today + self._usd_reserved
                if held >= self.usd_per_day or held + usd > self.usd_per_day:
                    return False
            self._tokens -= 1.0
            self._used_today += 1
            self._usd_reserved += usd
            return True

    def release(self, usd: float) -> None:
        """Give back a reservation of `try_reserve` once the call's real cost is charged
        (or the call failed before the provider answered)."""
        usd = usd if usd > 0 and math.isfinite(usd) else 0.0
        with self._lock:
            self._usd_reserved = max(self._usd_reserved - usd, 0.0)

    def reserved_usd(self) -> float:
        with self._lock:
            return self._usd_reserved

    def charge(self, usd: float) -> None:
        """Add a finished call's cost to today's spend (negative or non-finite: ignored)."""
        if not (usd > 0 and math.isfinite(usd)):
            return
        with self._lock:
            self._refill(self._clock())
            self._usd_today += usd

    def spent_usd_today(self) -> float:
        with self._lock:
            self._refill(self._clock())
            return self._usd_today

    def acquire(self) -> None:
        if not self.try_acquire():
            raise JudgeBudgetExhausted("judge budget spent")

    def remaining(self) -> dict[str, float]:
        """Calls left per period ("minute", "day") and, with `usd_per_day`, the USD left
        today ("usd_day"); unlimited periods are absent."""
        with self._lock:
            self._refill(self._clock())
            out: dict[str, float] = {}
            if self.calls_per_minute is not None:
                out["minute"] = math.floor(self._tokens)
            if self.calls_per_day is not None:
                out["day"] = float(self.calls_per_day - self._used_today)
            if self.usd_per_day is not None:
                held = self._usd_today + self._usd_reserved
                out["usd_day"] = max(self.usd_per_day - held, 0.0)
            return out

    def observe_demand(self) -> None:
        """Record that a conversation needing the judge arrived (before any decision)."""
        with self._lock:
            self._demand.observe(self._clock())

    def adaptive_share(self, calls_per_conversation: float = 1.0) -> float:
        """Share of judge-needing conversations the day's remaining allowance can pay for."""
        with self._lock:
            now = self._clock()
            self._refill(now)
            if self.calls_per_day is None or self._demand.rate <= 0:
                return 1.0
            seconds_left = (self._day + 1) * _DAY_S - now
            expected = self._demand.rate * seconds_left * calls_per_conversation
            left = self.calls_per_day - self._used_today
            return 1.0 if expected <= left else max(left / expected, 0.0)
