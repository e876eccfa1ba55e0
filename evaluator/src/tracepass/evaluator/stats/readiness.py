"""Readiness: one rule, in the same words on every surface.

Every surface that says whether an agent is ready (`tracepass evaluate` and `probe`'s
readiness line and default gate, the web UI's overview, the `tracepass_readiness`
gauge, the dashboard, the alert rules) asks this module, with the same k (the
collector's `metrics.headline_k`) and target (`metrics.pass_pow_k_target`, the rules'
`tracepass:pass_pow_k_target`), of the same credible interval of pass^k:

    lower bound > target  -> production ready
    upper bound < target  -> needs improvement   (what the alert fires on)
    otherwise             -> inconclusive        (the interval holds the target)
    no interval           -> insufficient data

So "production ready" is never said on a point estimate with a wide interval: 5 of 5
trials give pass^3 in [0.16, 0.99], which is inconclusive. Fair Forge's table (pass@1 >
0.90 and pass^3 > 0.70 on point estimates) is how peers say it; docs/statistics.md §3
compares the two.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

__all__ = [
    "HEADLINE_K",
    "TARGET",
    "Readiness",
    "ReadinessRule",
    "Verdict",
    "words",
]

# The defaults of `metrics.headline_k` and `metrics.pass_pow_k_target` (and of the
# shipped rules' `tracepass:pass_pow_k_target{k="3"} 0.7`, which a test compares).
HEADLINE_K: Final = 3
TARGET: Final = 0.7


class Readiness(StrEnum):
    PRODUCTION_READY = "production_ready"
    INCONCLUSIVE = "inconclusive"
    NEEDS_IMPROVEMENT = "needs_improvement"
    INSUFFICIENT_DATA = "insufficient_data"


def words(tier: str) -> str:
    """The tier as people read it: `production ready`, `needs improvement`, …"""
    return str(tier).replace("_", " ")


@dataclass(frozen=True)
class Verdict:
    """The rule applied to one interval: the tier and what it was decided from."""

    tier: Readiness
    k: int
    target: float
    level: float
    lower: float | None
    upper: float | None

    def label(self) -> str:
        """The tier in words: what the UI's readiness column and the report show."""
        return words(self.tier)

    def sentence(self) -> str:
        """`readiness: inconclusive (pass^3 95% interval [0.16, 0.99] holds the target
        0.70; production ready needs its lower bound above it)`: the one sentence of the
        CLI (the UI and the HTML report show the same words and `reason`)."""
        return f"readiness: {self.label()} ({self.reason()})"

    def reason(self) -> str:
        """What the tier was decided from, in words (the sentence's parenthesis)."""
        name, target = f"pass^{self.k}", f"{self.target:.2f}"
        if self.lower is None or self.upper is None:
            why = f"no {name} interval yet; production ready needs its lower bound above {target}"
        else:
            interval = f"{name} {self.level:.0%} interval [{self.lower:.2f}, {self.upper:.2f}]"
            why = {
                Readiness.PRODUCTION_READY: f"{interval}: its lower bound clears the target {target}",
                Readiness.NEEDS_IMPROVEMENT: f"{interval}: even its upper bound is below the target {target}",
            }.get(
                self.tier,
                f"{interval} holds the target {target}; production ready needs its lower bound above it",
            )
        return why

    def as_json(self) -> dict[str, Any]:
        return {
            "tier": str(self.tier),
            "k": self.k,
            "target": self.target,
            "level": self.level,
            "lower": self.lower,
            "upper": self.upper,
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Verdict:
        return cls(
            Readiness(doc["tier"]),
            int(doc["k"]),
            float(doc["target"]),
            float(doc["level"]),
            doc.get("lower"),
            doc.get("upper"),
        )


@dataclass(frozen=True)
class ReadinessRule:
    """pass^k at `k` against `target`, judged on the credible interval's bounds."""

    k: int = HEADLINE_K
    target: float = TARGET

    def __post_init__(self) -> None:
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise ValueError(f"readiness k must be an integer >= 1, got {self.k!r}")
        if not 0.0 < float(self.target) < 1.0:
            raise ValueError(f"readiness target must be within (0, 1), got {self.target!r}")

    def classify(self, lower: float | None, upper: float | None) -> Readiness:
        if lower is None or upper is None:
            return Readiness.INSUFFICIENT_DATA
        if not 0.0 <= lower <= upper <= 1.0:
            raise ValueError(f"not a credible interval of a probability: [{lower}, {upper}]")
        if lower > self.target:
            return Readiness.PRODUCTION_READY
        if upper < self.target:
            return Readiness.NEEDS_IMPROVEMENT
        return Readiness.INCONCLUSIVE

    def verdict(self, lower: float | None, upper: float | None, level: float) -> Verdict:
        return Verdict(self.classify(lower, upper), self.k, self.target, level, lower, upper)
