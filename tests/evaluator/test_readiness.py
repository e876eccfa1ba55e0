"""The one readiness rule: pass^k's credible interval against the target."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracepass.evaluator.stats.passk import estimate
from tracepass.evaluator.stats.readiness import (
    HEADLINE_K,
    TARGET,
    Readiness,
    ReadinessRule,
    Verdict,
)


@pytest.mark.parametrize(
    ("lower", "upper", "tier"),
    [
        (0.71, 0.99, Readiness.PRODUCTION_READY),
        (0.70, 0.99, Readiness.INCONCLUSIVE),  # the lower bound must clear the target
        (0.16, 0.99, Readiness.INCONCLUSIVE),  # the 5 trials
        (0.10, 0.70, Readiness.INCONCLUSIVE),
        (0.10, 0.69, Readiness.NEEDS_IMPROVEMENT),
        (None, None, Readiness.INSUFFICIENT_DATA),
        (0.2, None, Readiness.INSUFFICIENT_DATA),
    ],
)
def test_tiers_and_boundaries(lower: float | None, upper: float | None, tier: Readiness) -> None:
    assert ReadinessRule().classify(lower, upper) is tier


def test_defaults_are_the_headline() -> None:
    assert (ReadinessRule().k, ReadinessRule().target) == (HEADLINE_K, TARGET) == (3, 0.7)


@given(
    n=st.integers(min_value=0, max_value=400),
    data=st.data(),
    k=st.sampled_from([1, 3, 5]),
    target=st.floats(min_value=0.05, max_value=0.95),
)
def test_production_ready_only_when_the_lower_bound_clears(
    n: int, data: st.DataObject, k: int, target: float
) -> None:
    """On real credible intervals: "production ready" exactly when the lower bound of
    pass^k is above the target, "needs improvement" exactly when the upper one is below."""
    c = data.draw(st.integers(min_value=0, max_value=n))
    pow_k = estimate(n, c, k).pass_pow_k
    verdict = ReadinessRule(k, target).verdict(pow_k.lower, pow_k.upper, 0.95)
    if n == 0:
        assert verdict.tier is Readiness.INSUFFICIENT_DATA
        return
    assert pow_k.lower is not None
    assert pow_k.upper is not None
    assert (verdict.tier is Readiness.PRODUCTION_READY) == (pow_k.lower > target)
    assert (verdict.tier is Readiness.NEEDS_IMPROVEMENT) == (pow_k.upper < target)
    assert Verdict.from_json(verdict.as_json()) == verdict
    assert verdict.sentence().startswith(f"readiness: {verdict.label()} (pass^{k} 95% interval [")


def test_five_of_five_is_inconclusive_and_needs_about_31() -> None:
    """5 of 5 trials give pass^3 in [0.16, 0.99]; all-passing trials clear 0.7 from 31."""
    rule = ReadinessRule()
    five = estimate(5, 5, 3).pass_pow_k
    assert (round(five.lower, 2), round(five.upper, 2)) == (0.16, 0.99)
    assert rule.classify(five.lower, five.upper) is Readiness.INCONCLUSIVE
    ready = [n for n in range(1, 60) if rule.classify(*_bounds(n, n)) is Readiness.PRODUCTION_READY]
    assert ready[0] == 31


def _bounds(n: int, c: int) -> tuple[float | None, float | None]:
    pow_k = estimate(n, c, 3).pass_pow_k
    return pow_k.lower, pow_k.upper


def test_sentences() -> None:
    rule = ReadinessRule()
    assert rule.verdict(None, None, 0.95).sentence() == (
        "readiness: insufficient data (no pass^3 interval yet; production ready needs its "
        "lower bound above 0.70)"
    )
    assert rule.verdict(0.16, 0.99, 0.95).sentence() == (
        "readiness: inconclusive (pass^3 95% interval [0.16, 0.99] holds the target 0.70; "
        "production ready needs its lower bound above it)"
    )
    assert rule.verdict(0.75, 0.9, 0.9).sentence() == (
        "readiness: production ready (pass^3 90% interval [0.75, 0.90]: its lower bound "
        "clears the target 0.70)"
    )
    assert ReadinessRule(5, 0.8).verdict(0.1, 0.5, 0.95).sentence() == (
        "readiness: needs improvement (pass^5 95% interval [0.10, 0.50]: even its upper "
        "bound is below the target 0.80)"
    )


def test_bad_rules_and_intervals_are_refused() -> None:
    with pytest.raises(ValueError, match="k must be an integer"):
        ReadinessRule(0)
    with pytest.raises(ValueError, match="target must be within"):
        ReadinessRule(3, 1.0)
    with pytest.raises(ValueError, match="not a credible interval"):
        ReadinessRule().classify(0.9, 0.1)
