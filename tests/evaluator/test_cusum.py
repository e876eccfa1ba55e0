"""Bernoulli CUSUM against its closed-form increments and a simulated run length."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracepass.evaluator.stats.cusum import BernoulliCusum, average_run_length, suggest_threshold


def test_closed_form_increments() -> None:
    c = BernoulliCusum(p0=0.9, p1=0.7)
    assert c.increment(True) == pytest.approx(math.log(0.7 / 0.9))
    assert c.increment(False) == pytest.approx(math.log(0.3 / 0.1))


@given(st.lists(st.booleans(), max_size=200), st.floats(0.55, 0.99), st.floats(0.01, 0.5))
def test_recursion_matches_definition(outcomes: list[bool], p0: float, p1_frac: float) -> None:
    p1 = p0 * p1_frac
    c = BernoulliCusum(p0=p0, p1=p1)
    s = 0.0
    for ok in outcomes:
        s = max(0.0, s + (math.log(p1 / p0) if ok else math.log((1 - p1) / (1 - p0))))
        assert c.update(ok) == pytest.approx(s)
        assert c.value >= 0.0
    assert c.observations == len(outcomes)


def test_rises_on_a_drop_and_stays_low_in_control() -> None:
    rng = random.Random(42)
    c = BernoulliCusum(0.9, 0.7)
    for _ in range(300):
        c.update(rng.random() < 0.95)
    assert c.value < 3
    for _ in range(100):
        c.update(rng.random() < 0.6)
    assert c.value > 10


def test_state_roundtrip_and_reset() -> None:
    c = BernoulliCusum(0.8, 0.5)
    for ok in (False, False, True):
        c.update(ok)
    d = BernoulliCusum.from_state(c.to_state())
    assert d == c
    d.reset()
    assert d.value == 0.0


@pytest.mark.parametrize(("p0", "p1"), [(0.5, 0.5), (0.7, 0.9), (0.0, 0.5), (0.9, 1.0)])
def test_invalid_rates(p0: float, p1: float) -> None:
    with pytest.raises(ValueError, match=r"p0|p1"):
        BernoulliCusum(p0, p1)


def test_run_length_against_simulation() -> None:
    h = 4.0
    rng = random.Random(3)
    runs = []
    for _ in range(2000):
        c = BernoulliCusum(0.9, 0.7)
        n = 0
        while c.value <= h:
            c.update(rng.random() < 0.7)
            n += 1
        runs.append(n)
    simulated = sum(runs) / len(runs)
    assert average_run_length(0.7, h, 0.9, 0.7) == pytest.approx(simulated, rel=0.06)


def test_suggest_threshold_reaches_target() -> None:
    h = suggest_threshold(0.9, 0.7, arl0=500)
    assert average_run_length(0.9, h, 0.9, 0.7) >= 500
    assert average_run_length(0.9, h - 0.05, 0.9, 0.7) < 500 * 1.1
