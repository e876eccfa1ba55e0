"""Settings of the rolling aggregator: windows, k values, prior, CUSUM. A module of its
own so that the aggregator (`rolling.py`) and its persisted state (`_rolling_state.py`,
which stores the config it was built with) both import it without importing each other.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tracepass.evaluator.stats.cusum import BernoulliCusum
from tracepass.evaluator.stats.passk import PriorSpec, prior_params, validate_k

__all__ = ["RollingConfig"]


@dataclass(frozen=True, slots=True)
class RollingConfig:
    windows: tuple[tuple[str, float], ...] = (("1h", 3600.0), ("24h", 86400.0))
    # None disables the decayed window.
    decay_half_life_s: float | None = 900.0
    decay_window_name: str = "fast"
    ks: tuple[int, ...] = (1, 3, 5)
    level: float = 0.95
    prior: PriorSpec = "uniform"
    min_conversations: int = 20
    cusum_p0: float = 0.9
    cusum_p1: float = 0.7
    # Outcomes are counted per bucket of this many seconds: a sliding window holds the
    # last ceil(seconds / bucket_s) buckets (the current one included), so its memory
    # depends on keys x buckets, not on traffic (docs/statistics.md, "Buckets").
    bucket_s: float = 60.0
    # How long a conversation's contribution stays undoable by a later revision: the
    # longest gap between two evaluations of one conversation the caller can produce
    # (the collector: assembly.retention_s + idle_timeout_s + a margin). A revision
    # arriving later counts as a new conversation.
    revision_horizon_s: float = 4500.0

    def buckets(self, seconds: float) -> int:
        """Buckets a window of `seconds` holds (its length rounded up to buckets)."""
        return max(1, math.ceil(seconds / self.bucket_s))

    def __post_init__(self) -> None:
        names = [w[0] for w in self.windows]
        if self.decay_half_life_s is not None:
            names.append(self.decay_window_name)
            if not (self.decay_half_life_s > 0 and math.isfinite(self.decay_half_life_s)):
                raise ValueError(f"decay_half_life_s must be > 0, got {self.decay_half_life_s}")
        if not names:
            raise ValueError("configure at least one window (time window or decay half-life)")
        if len(set(names)) != len(names):
            raise ValueError(f"window names must be unique, got {names}")
        for name, seconds in self.windows:
            if not (seconds > 0 and math.isfinite(seconds)):
                raise ValueError(f"window {name!r}: seconds must be > 0, got {seconds}")
        if not self.ks:
            raise ValueError("ks must name at least one k")
        for k in self.ks:
            validate_k(k)
        if not 0 < self.level < 1:
            raise ValueError(f"level must be in (0, 1), got {self.level}")
        prior_params(self.prior)
        if self.min_conversations < 1:
            raise ValueError(f"min_conversations must be >= 1, got {self.min_conversations}")
        BernoulliCusum(self.cusum_p0, self.cusum_p1)  # validates the rates
        for name, value in (
            ("bucket_s", self.bucket_s),
            ("revision_horizon_s", self.revision_horizon_s),
        ):
            if not (value > 0 and math.isfinite(value)):
                raise ValueError(f"{name} must be > 0, got {value}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "windows": [[n, s] for n, s in self.windows],
            "decay_half_life_s": self.decay_half_life_s,
            "decay_window_name": self.decay_window_name,
            "ks": list(self.ks),
            "level": self.level,
            "prior": list(self.prior) if isinstance(self.prior, tuple) else self.prior,
            "min_conversations": self.min_conversations,
            "cusum_p0": self.cusum_p0,
            "cusum_p1": self.cusum_p1,
            "bucket_s": self.bucket_s,
            "revision_horizon_s": self.revision_horizon_s,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RollingConfig:
        prior = d.get("prior", "uniform")
        return cls(
            windows=tuple((str(n), float(s)) for n, s in d["windows"]),
            decay_half_life_s=d.get("decay_half_life_s"),
            decay_window_name=d.get("decay_window_name", "fast"),
            ks=tuple(int(k) for k in d["ks"]),
            level=float(d["level"]),
            prior=(float(prior[0]), float(prior[1])) if isinstance(prior, list) else prior,
            min_conversations=int(d["min_conversations"]),
            cusum_p0=float(d["cusum_p0"]),
            cusum_p1=float(d["cusum_p1"]),
            # States written before buckets (versions 1 and 2) lack both: the defaults.
            bucket_s=float(d.get("bucket_s", 60.0)),
            revision_horizon_s=float(d.get("revision_horizon_s", 4500.0)),
        )
