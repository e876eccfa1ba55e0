"""Readiness tiers of the Fair Forge classification table, boundaries included."""

from __future__ import annotations

import pytest

from tracepass.evaluator.stats.passk import estimate
from tracepass.evaluator.stats.readiness import Readiness, classify, classify_estimates


@pytest.mark.parametrize(
    ("p1", "p3", "tier"),
    [
        (0.95, 0.85, Readiness.PRODUCTION_READY),
        (0.95, 0.50, Readiness.FUNCTIONAL_BUT_INCONSISTENT),
        (0.95, 0.70, Readiness.FUNCTIONAL_BUT_INCONSISTENT),
        (0.95, 0.10, Readiness.FUNCTIONAL_BUT_INCONSISTENT),
        (0.90, 0.99, Readiness.NEEDS_IMPROVEMENT),
        (0.80, 0.10, Readiness.NEEDS_IMPROVEMENT),
        (0.70, 0.30, Readiness.NEEDS_IMPROVEMENT),
        (0.667, 0.296, Readiness.NOT_READY),  # the paper's worked example
        (0.0, None, Readiness.NOT_READY),
        (None, 0.5, Readiness.INSUFFICIENT_DATA),
        (0.95, None, Readiness.INSUFFICIENT_DATA),
    ],
)
def test_table(p1: float | None, p3: float | None, tier: Readiness) -> None:
    assert classify(p1, p3) is tier


def test_from_estimates() -> None:
    k1, k3 = estimate(100, 94, 1), estimate(100, 94, 3)
    assert classify_estimates(k1, k3) is Readiness.PRODUCTION_READY
    assert classify_estimates(k1, k3, estimator="unbiased") is Readiness.PRODUCTION_READY
    # The lower credible bound of pass@1 (~0.88) does not clear 0.90: not *confidently* ready.
    assert classify_estimates(k1, k3, use="lower") is Readiness.NEEDS_IMPROVEMENT
    assert classify_estimates(estimate(0, 0, 1), estimate(0, 0, 3)) is Readiness.INSUFFICIENT_DATA
    with pytest.raises(ValueError, match="k=1 and k=3"):
        classify_estimates(k3, k1)


def test_out_of_range() -> None:
    with pytest.raises(ValueError, match=r"pass@1 must be a probability"):
        classify(1.5, 0.2)
