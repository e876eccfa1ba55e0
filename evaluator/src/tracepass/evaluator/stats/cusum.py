"""Bernoulli CUSUM: detect a drop of the conversation success rate from p0 to p1.

Why CUSUM next to windowed pass^k: a window average needs a window's worth of bad
conversations before it moves, while CUSUM accumulates evidence one conversation at a
time and is the fastest detector of a persistent shift for a given false-alarm rate
(Page 1954; Lorden's optimality). Each outcome adds its log-likelihood ratio of "rate is
p1" versus "rate is p0":

    success: log(p1 / p0)          (< 0 when p1 < p0)
    failure: log((1-p1) / (1-p0))  (> 0 when p1 < p0)

and S = max(0, S + llr). S stays near 0 while the agent performs at p0 and climbs
roughly linearly once it performs at p1; an alarm is S > h. `suggest_threshold` picks h
for a desired in-control average run length (mean conversations between false alarms).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["BernoulliCusum", "average_run_length", "suggest_threshold"]


def _check_rates(p0: float, p1: float) -> None:
    for name, p in (("p0", p0), ("p1", p1)):
        if not (isinstance(p, int | float) and 0.0 < float(p) < 1.0):
            raise ValueError(f"{name} must be strictly between 0 and 1, got {p!r}")
    if not p1 < p0:
        raise ValueError(f"CUSUM detects a drop: p1 must be < p0, got p0={p0}, p1={p1}")


@dataclass(slots=True)
class BernoulliCusum:
    """Mutable one-sided CUSUM statistic. `update` returns the new S."""

    p0: float = 0.9
    p1: float = 0.7
    value: float = 0.0
    observations: int = 0

    def __post_init__(self) -> None:
        _check_rates(self.p0, self.p1)

    @property
    def llr_success(self) -> float:
        return math.log(self.p1 / self.p0)

    @property
    def llr_failure(self) -> float:
        return math.log((1.0 - self.p1) / (1.0 - self.p0))

    def increment(self, success: bool) -> float:
        return self.llr_success if success else self.llr_failure

    def update(self, success: bool) -> float:
        self.value = max(0.0, self.value + self.increment(success))
        self.observations += 1
        return self.value

    def reset(self) -> None:
        self.value = 0.0

    def to_state(self) -> dict[str, float | int]:
        return {"p0": self.p0, "p1": self.p1, "value": self.value, "n": self.observations}

    @classmethod
    def from_state(cls, state: dict[str, float | int]) -> BernoulliCusum:
        return cls(
            p0=float(state["p0"]),
            p1=float(state["p1"]),
            value=float(state["value"]),
            observations=int(state["n"]),
        )


def average_run_length(p: float, h: float, p0: float, p1: float, *, grid: int = 800) -> float:
    """Mean number of conversations until S > h when the true success rate is p.

    Solved numerically as a Markov chain on a discretized [0, h] (Brook & Evans 1972):
    state i means S in bin i; the expected time to absorption L satisfies
    (I - Q) L = 1. Converged (to <0.1%) by the default grid of 800 states — guidance, not a contract.
    """
    import numpy as np

    _check_rates(p0, p1)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p must be in [0, 1], got {p}")
    if h <= 0:
        raise ValueError(f"h must be > 0, got {h}")
    up = math.log((1 - p1) / (1 - p0))
    down = math.log(p1 / p0)
    width = h / grid
    centers = (np.arange(grid) + 0.5) * width
    centers[0] = 0.0  # the reflecting barrier holds mass at exactly 0
    q = np.zeros((grid, grid))

    def target(s: np.ndarray) -> np.ndarray:
        idx = np.floor(np.maximum(s, 0.0) / width + 0.5).astype(int)
        idx[s <= 0] = 0
        return np.asarray(idx)

    rows = np.arange(grid)
    for step, prob in ((up, 1.0 - p), (down, p)):
        nxt = centers + step
        cols = target(nxt)
        inside = nxt <= h
        np.add.at(q, (rows[inside], np.minimum(cols[inside], grid - 1)), prob)
    lengths = np.linalg.solve(np.eye(grid) - q, np.ones(grid))
    return float(lengths[0])


def suggest_threshold(p0: float, p1: float, arl0: float = 1000.0) -> float:
    """Smallest h (to 0.01) whose in-control ARL (true rate p0) reaches `arl0`."""
    _check_rates(p0, p1)
    if arl0 <= 1:
        raise ValueError(f"arl0 must be > 1, got {arl0}")
    lo, hi = 0.01, 1.0
    while average_run_length(p0, hi, p0, p1) < arl0:
        hi *= 2
        if hi > 1e4:
            raise ValueError("arl0 unreachable")
    while hi - lo > 0.01:
        mid = (lo + hi) / 2
        if average_run_length(p0, mid, p0, p1) < arl0:
            lo = mid
        else:
            hi = mid
    return math.ceil(hi * 100) / 100
