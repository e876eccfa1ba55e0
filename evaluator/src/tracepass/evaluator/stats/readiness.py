"""Deployment readiness tier from (pass@1, pass^3), after Fair Forge's classification.

The Fair Forge paper ("Agentic Evaluation Metric", Fritz & Fiorenza 2026, table
"Agent reliability classification by pass@1 and pass^3") reads:

    pass@1 > 0.90 and pass^3 > 0.70       -> production ready
    pass@1 > 0.90 and pass^3 0.30 - 0.70  -> functional but inconsistent
    pass@1 0.70 - 0.90 (any pass^3)       -> needs improvement
    pass@1 < 0.70 (any pass^3)            -> not ready

The table in the paper leaves two corners undefined, so we close them (documented in
docs/statistics.md): pass^3 < 0.30 with pass@1 > 0.90 is also "functional but
inconsistent" (it is only reachable with small-n unbiased or lower-bound inputs, since
p > 0.9 implies p^3 > 0.729), and boundaries go to the *lower* tier (exactly 0.90 is
"needs improvement", exactly 0.70 pass^3 is "functional but inconsistent"), so a tier
is only granted when the threshold is strictly exceeded, as the paper's ">" says.
Missing inputs give INSUFFICIENT_DATA rather than a guess.
"""

from __future__ import annotations

from enum import StrEnum

from tracepass.evaluator.stats.passk import PassKPair

__all__ = ["Readiness", "classify", "classify_estimates", "verdict_sentence"]


class Readiness(StrEnum):
    PRODUCTION_READY = "production_ready"
    FUNCTIONAL_BUT_INCONSISTENT = "functional_but_inconsistent"
    NEEDS_IMPROVEMENT = "needs_improvement"
    NOT_READY = "not_ready"
    INSUFFICIENT_DATA = "insufficient_data"


def _check(name: str, value: float) -> float:
    if not (isinstance(value, int | float) and 0.0 <= float(value) <= 1.0):
        raise ValueError(f"{name} must be a probability in [0, 1], got {value!r}")
    return float(value)


def classify(pass_at_1: float | None, pass_pow_3: float | None) -> Readiness:
    if pass_at_1 is None:
        return Readiness.INSUFFICIENT_DATA
    p1 = _check("pass@1", pass_at_1)
    if p1 < 0.70:
        return Readiness.NOT_READY
    if p1 <= 0.90:
        return Readiness.NEEDS_IMPROVEMENT
    if pass_pow_3 is None:
        return Readiness.INSUFFICIENT_DATA
    p3 = _check("pass^3", pass_pow_3)
    if p3 > 0.70:
        return Readiness.PRODUCTION_READY
    return Readiness.FUNCTIONAL_BUT_INCONSISTENT


def classify_estimates(
    k1: PassKPair, k3: PassKPair, *, use: str = "point", estimator: str = "plugin"
) -> Readiness:
    """Classify from estimates. `use="lower"` classifies on the lower credible/Wilson
    bounds: the tier the agent *confidently* reaches. `estimator` picks the point value
    (plugin | unbiased | mean) when `use="point"`."""
    if k1.k != 1 or k3.k != 3:
        raise ValueError(f"need the k=1 and k=3 estimates, got k={k1.k} and k={k3.k}")
    if use == "lower":
        return classify(k1.pass_at_k.lower, k3.pass_pow_k.lower)
    if use != "point":
        raise ValueError(f"use must be 'point' or 'lower', got {use!r}")
    if estimator not in ("plugin", "unbiased", "mean"):
        raise ValueError(f"estimator must be plugin, unbiased or mean, got {estimator!r}")
    return classify(getattr(k1.pass_at_k, estimator), getattr(k3.pass_pow_k, estimator))


# The thresholds of PRODUCTION_READY, as the sentence names them.
READY_PASS_AT_1 = 0.90
READY_PASS_POW_3 = 0.70


def _bound(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def verdict_sentence(
    tier: str, pass_at_1_lower: float | None, pass_pow_3_lower: float | None
) -> str:
    """`readiness: <tier> (lower bounds pass@1 0.93, pass^3 0.62; production ready needs
    them above 0.90 and 0.70)`: the same words wherever a readiness verdict is printed."""
    words = str(tier).replace("_", " ")
    return (
        f"readiness: {words} (lower bounds pass@1 {_bound(pass_at_1_lower)}, "
        f"pass^3 {_bound(pass_pow_3_lower)}; production ready needs them above "
        f"{READY_PASS_AT_1:.2f} and {READY_PASS_POW_3:.2f})"
    )
