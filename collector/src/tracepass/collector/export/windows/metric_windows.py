"""The rolling windows as the metrics hold them: one lock every writer takes, the
snapshot one collection reads, and the gauges computed from it.

Counters say what happened; these gauges say what one replica's `RollingAggregator`
estimates over its windows (pass@k / pass^k with their credible bounds, n and c,
CUSUM, readiness): what PromQL cannot compute from the counters. Every name is a
contract (docs/exported-metrics.md).

Why the snapshot is cached: all gauge callbacks of one collection must report the same
state (n, c, the estimates and bounds consistent with each other), and computing it
costs far more than reading it; the first gauge registered refreshes it at the start of
every collection (the SDK runs callbacks in registration order).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

from opentelemetry.metrics import CallbackOptions, Meter, Observation

from tracepass.collector.export.windows.window_entry import WindowEntry
from tracepass.evaluator.stats.readiness import ReadinessRule
from tracepass.evaluator.stats.rolling import (
    AddResult,
    Key,
    KeySnapshot,
    RollingAggregator,
    StateCapture,
)

__all__ = ["LABELS", "MetricWindows"]

T = TypeVar("T")
LABELS = ("agent_name", "agent_version", "reference_set")
Callback = Callable[[CallbackOptions], Iterable[Observation]]


class MetricWindows:
    """A `RollingAggregator` behind one lock, with its snapshot cache and gauges."""

    def __init__(
        self,
        aggregator: RollingAggregator,
        clock: Callable[[], float],
        readiness: ReadinessRule | None = None,
    ) -> None:
        self.aggregator = aggregator
        self._clock = clock
        # metrics.readiness_rule(): headline_k and pass_pow_k_target.
        self.readiness = readiness or ReadinessRule()
        self._lock = threading.Lock()
        self._cache: tuple[float, list[KeySnapshot]] | None = None
        self._dirty = False

    def __iter__(self) -> Iterator[Key]:
        return iter(self.aggregator)

    def __len__(self) -> int:
        """Entries the windows hold (alive or superseded), all keys."""
        with self._lock:
            return len(self.aggregator)

    def add(self, key: Key, entry: WindowEntry, revision: int, now: float) -> AddResult:
        """The one way into the windows: live results and journal replays alike."""
        with self._lock:
            added = self.aggregator.add(
                key,
                task=entry.task,
                success=entry.success,
                now=now,
                conversation_id=entry.conversation_id,
                revision=revision,
                tag=entry.tag,
            )
            self._dirty = True  # the next read (service or scrape) sees this result
        return added

    def adopt(self, aggregator: RollingAggregator) -> None:
        """Replace the windows (restored from a snapshot, before the first result)."""
        with self._lock:
            self.aggregator = aggregator
            self._dirty = True

    def capture(self, position: Callable[[], T]) -> tuple[StateCapture, T]:
        """A point-in-time copy of the windows and `position()` read under the lock every
        writer of the windows takes."""
        with self._lock:
            return self.aggregator.capture(), position()

    def snapshot(self, *, refresh: bool = False, in_collection: bool = False) -> list[KeySnapshot]:
        """The aggregator's snapshot, cached (see the module docstring)."""
        now = self._clock()
        with self._lock:
            cache = self._cache
            # Inside a collection, keep the state its first callback saw; outside,
            # reuse it unless results arrived or time moved on.
            reuse = in_collection or (not self._dirty and now - cache[0] < 1.0) if cache else False
            if cache is not None and not refresh and reuse:
                return cache[1]
            snap = self.aggregator.snapshot(now)
            self._cache = (now, snap)
            self._dirty = False
            return snap

    # ------------------------------------------------------------------ gauges

    def register_gauges(self, meter: Meter) -> None:
        """The window gauges on `meter` (the first one refreshes the snapshot)."""
        for name, fn, desc in (
            ("tracepass_pass_at_k", self._obs_point("pass_at_k", refresh=True), "pass@k point estimates"),
            ("tracepass_pass_at_k_lower", self._obs_bound("pass_at_k", "lower"), "pass@k lower credible bound"),
            ("tracepass_pass_at_k_upper", self._obs_bound("pass_at_k", "upper"), "pass@k upper credible bound"),
            ("tracepass_pass_pow_k", self._obs_point("pass_pow_k"), "pass^k point estimates"),
            ("tracepass_pass_pow_k_lower", self._obs_bound("pass_pow_k", "lower"), "pass^k lower credible bound"),
            ("tracepass_pass_pow_k_upper", self._obs_bound("pass_pow_k", "upper"), "pass^k upper credible bound"),
            ("tracepass_window_conversations", self._obs_counts("n"), "Conversations (n) in a rolling window"),
            ("tracepass_window_successes", self._obs_counts("c"), "Passing conversations (c) in a rolling window"),
            ("tracepass_cusum", self._obs_cusum, "Bernoulli CUSUM statistic of the success rate"),
            ("tracepass_readiness", self._obs_readiness, "1 for the current readiness tier"),
            ("tracepass_window_entries", self._obs_entries, "Rows the rolling windows hold: conversation-index rows within the revision horizon plus bucket cells, all keys"),
        ):  # fmt: skip
            meter.create_observable_gauge(name, callbacks=[fn], description=desc)

    def _obs_point(self, metric: str, *, refresh: bool = False) -> Callback:
        def cb(_: CallbackOptions) -> Iterable[Observation]:
            for ks in self.snapshot(refresh=refresh, in_collection=True):
                base = dict(zip(LABELS, ks.key, strict=True))
                for w in ks.windows:
                    for k, est in w.estimates.items():
                        q = getattr(est, metric)
                        for estimator, value in (
                            ("plugin", q.plugin),
                            ("unbiased", q.unbiased),
                            ("bayes", q.mean),
                        ):
                            if value is not None:
                                attrs = {**base, "window": w.window, "k": str(k)}
                                yield Observation(value, {**attrs, "estimator": estimator})

        return cb

    def _obs_bound(self, metric: str, bound: str) -> Callback:
        def cb(_: CallbackOptions) -> Iterable[Observation]:
            for ks in self.snapshot(in_collection=True):
                base = dict(zip(LABELS, ks.key, strict=True))
                for w in ks.windows:
                    for k, est in w.estimates.items():
                        value = getattr(getattr(est, metric), bound)
                        if value is not None:
                            yield Observation(
                                value,
                                {**base, "window": w.window, "k": str(k), "estimator": "bayes"},
                            )

        return cb

    def _obs_counts(self, field: str) -> Callback:
        def cb(_: CallbackOptions) -> Iterable[Observation]:
            for ks in self.snapshot(in_collection=True):
                base = dict(zip(LABELS, ks.key, strict=True))
                for w in ks.windows:
                    yield Observation(float(getattr(w, field)), {**base, "window": w.window})

        return cb

    def _obs_cusum(self, _: CallbackOptions) -> Iterable[Observation]:
        for ks in self.snapshot(in_collection=True):
            if ks.cusum_observations:
                yield Observation(ks.cusum, dict(zip(LABELS, ks.key, strict=True)))

    def _obs_readiness(self, _: CallbackOptions) -> Iterable[Observation]:
        # The readiness rule (evaluator/stats/readiness.py) on each window's credible
        # interval of pass^headline_k: the tier the UI and the CLI say.
        rule = self.readiness
        for ks in self.snapshot(in_collection=True):
            base = dict(zip(LABELS, ks.key, strict=True))
            for w in ks.windows:
                est = w.estimates.get(rule.k)
                if est is None:
                    continue
                tier = rule.classify(est.pass_pow_k.lower, est.pass_pow_k.upper)
                yield Observation(1.0, {**base, "window": w.window, "tier": tier.value})

    def _obs_entries(self, _: CallbackOptions) -> Iterable[Observation]:
        """`tracepass_window_entries`: what the rolling windows hold in memory (one entry
        per evaluated conversation and key, kept for the longest window); with
        `tracepass_retained_spans`, what grows with traffic."""
        yield Observation(float(len(self)))
