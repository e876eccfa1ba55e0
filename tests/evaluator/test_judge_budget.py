"""The judge budget: token bucket per minute, allowance per UTC day, adaptive share."""

from __future__ import annotations

import pytest

from tracepass.evaluator.judge.call_budget import JudgeBudget, JudgeBudgetExhausted


class Clock:
    def __init__(self, now: float = 86_400.0 * 100) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_per_minute_bucket_refills_continuously() -> None:
    clock = Clock()
    budget = JudgeBudget(calls_per_minute=6, clock=clock)
    assert [budget.try_acquire() for _ in range(7)] == [True] * 6 + [False]
    clock.now += 10  # one call's worth
    assert budget.try_acquire()
    assert not budget.try_acquire()
    assert budget.remaining() == {"minute": 0}


def test_daily_allowance_resets_at_utc_midnight() -> None:
    clock = Clock(86_400.0 * 100 + 86_000)
    budget = JudgeBudget(calls_per_day=3, clock=clock)
    for _ in range(3):
        budget.acquire()
    with pytest.raises(JudgeBudgetExhausted):
        budget.acquire()
    assert budget.remaining() == {"day": 0.0}
    clock.now += 400  # past midnight
    assert budget.try_acquire()
    assert budget.remaining() == {"day": 2.0}


def test_unlimited_budget() -> None:
    budget = JudgeBudget()
    assert budget.unlimited
    assert all(budget.try_acquire() for _ in range(1_000))
    assert budget.remaining() == {}
    assert budget.adaptive_share() == 1.0


def test_adaptive_share_makes_the_allowance_last_the_day() -> None:
    clock = Clock(86_400.0 * 100)  # midnight
    budget = JudgeBudget(calls_per_day=8_640, clock=clock)  # 0.1 call/s over the day
    for _ in range(600):  # demand of 1 conversation/s
        clock.now += 1
        budget.observe_demand()
    share = budget.adaptive_share()
    assert 0.08 < share < 0.12
    # Demand below the allowance: everything is judged.
    low = JudgeBudget(calls_per_day=1_000_000, clock=clock)
    for _ in range(100):
        clock.now += 1
        low.observe_demand()
    assert low.adaptive_share() == 1.0
