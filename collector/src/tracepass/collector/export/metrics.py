"""Evaluation results as OpenTelemetry metrics (the events are `events.py`).

Counters are the source of truth: they are monotonic, sum across replicas, and the
pooled plug-in pass^k over any range is recomputable from them in PromQL
(docs/exported-metrics.md). Gauges carry what PromQL cannot compute — unbiased per-task
estimators, exact Beta credible bounds, CUSUM — from one replica's RollingAggregator.

Every name below is a contract with deploy/ (recording and alert rules, dashboards):
change one only together with docs/exported-metrics.md.

Revisions: a re-evaluated conversation is counted again in `tracepass_conversations`
and its previous outcome in `tracepass_conversations_superseded` (same for turns), so
`conversations - superseded` is the net count; the RollingAggregator replaces the
earlier outcome in its windows.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections import Counter as Tally
from collections.abc import Callable, Iterable
from typing import Any

from opentelemetry._logs import Logger
from opentelemetry.metrics import CallbackOptions, Meter, Observation

from tracepass.collector.config import MetricsConfig
from tracepass.collector.export.cardinality import LabelLimiter
from tracepass.collector.export.events import EVENT_NAME, EvaluationEvents
from tracepass.collector.export.exemplars import ExemplarStore
from tracepass.collector.export.outcomes import (
    result_success,
    success_of,
    turn_outcome,
    violation_tally,
)
from tracepass.collector.export.window_entry import (
    UNMATCHED_TASK,
    WindowEntry,
    task_of,
    window_entry,
)
from tracepass.evaluator.models import Conversation, ConversationResult
from tracepass.evaluator.readiness import classify
from tracepass.evaluator.rolling import (
    AddResult,
    Key,
    KeySnapshot,
    RollingAggregator,
    RollingConfig,
)

__all__ = [
    "EVENT_NAME",
    "UNMATCHED_TASK",
    "EvaluationMetrics",
    "result_success",
    "rolling_config",
    "success_of",
    "task_of",
    "turn_outcome",
]

_log = logging.getLogger(__name__)

SCORE_BUCKETS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0)
LAG_BUCKETS = (0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
LABELS = ("agent_name", "agent_version", "reference_set")


def rolling_config(config: MetricsConfig) -> RollingConfig:
    """The RollingAggregator settings of the `metrics` config section."""
    return RollingConfig(
        windows=tuple((w.name, float(w.seconds)) for w in config.windows),
        decay_half_life_s=config.decay_half_life_s,
        ks=tuple(config.ks),
        level=config.credible_level,
        prior=config.prior,
        min_conversations=config.min_conversations,
        cusum_p0=config.cusum_p0,
        cusum_p1=config.cusum_p1,
    )


class EvaluationMetrics:
    """Instruments fed by `record()` for every evaluated conversation (and revision)."""

    def __init__(
        self,
        meter: Meter,
        config: MetricsConfig,
        aggregator: RollingAggregator | None = None,
        *,
        event_logger: Logger | None = None,
        clock: Callable[[], float] = time.time,
        exemplars: ExemplarStore | None = None,
    ) -> None:
        self.config = config
        self.exemplars = exemplars
        self.aggregator = aggregator or RollingAggregator(rolling_config(config))
        self._events = (
            EvaluationEvents(event_logger)
            if event_logger is not None and config.emit_evaluation_events
            else None
        )
        self._clock = clock
        self._lock = threading.Lock()
        self._cache: tuple[float, list[KeySnapshot]] | None = None
        self._dirty = False
        m = meter
        self.conversations = m.create_counter(
            "tracepass_conversations", description="Evaluated conversations, by outcome"
        )
        self.conversations_superseded = m.create_counter(
            "tracepass_conversations_superseded",
            description="Earlier evaluations replaced by a revision, by their outcome",
        )
        self.turns = m.create_counter("tracepass_turns", description="Evaluated turns, by outcome")
        self.turns_superseded = m.create_counter(
            "tracepass_turns_superseded",
            description="Turns of earlier evaluations replaced by a revision, by outcome",
        )
        self.tool_calls = m.create_counter(
            "tracepass_tool_calls", description="Tool calls in evaluated turns"
        )
        self.judge_calls = m.create_counter(
            "tracepass_judge_calls", description="LLM judge calls, by outcome"
        )
        self.violations = m.create_counter(
            "tracepass_policy_violations",
            description="Violated checks and policy rules in evaluated turns, by rule",
        )
        self.violations_superseded = m.create_counter(
            "tracepass_policy_violations_superseded",
            description="Violations of earlier evaluations replaced by a revision, by rule",
        )
        self.label_overflow = m.create_counter(
            "tracepass_label_overflow",
            description="Label values collapsed into 'other' by the cardinality limit",
        )
        self.ignored = m.create_counter(
            "tracepass_evaluations_ignored",
            description="Evaluation results not recorded, by reason",
        )
        self.tool_correctness = m.create_histogram(
            "tracepass_tool_correctness",
            description="Per-turn tool-correctness score, by dimension",
            explicit_bucket_boundaries_advisory=SCORE_BUCKETS,
        )
        self.trajectory_precision = m.create_histogram(
            "tracepass_trajectory_precision",
            description="Per-turn trajectory precision",
            explicit_bucket_boundaries_advisory=SCORE_BUCKETS,
        )
        self.trajectory_recall = m.create_histogram(
            "tracepass_trajectory_recall",
            description="Per-turn trajectory recall",
            explicit_bucket_boundaries_advisory=SCORE_BUCKETS,
        )
        self.evaluation_lag = m.create_histogram(
            "tracepass_evaluation_lag",
            unit="s",
            description="Time from a conversation's last span to its evaluation",
            explicit_bucket_boundaries_advisory=LAG_BUCKETS,
        )
        self.limiter = LabelLimiter(config.label_limit, self.label_overflow)
        for key in self.aggregator:
            for label, value in zip(LABELS, key, strict=True):
                self.limiter.seed(label, [value])
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
        ):  # fmt: skip
            m.create_observable_gauge(name, callbacks=[fn], description=desc)

    # ------------------------------------------------------------------ recording

    def labels(self, result: ConversationResult) -> dict[str, str]:
        return self.common_labels(result.agent_name, result.agent_version, result.reference_set)

    def common_labels(
        self, agent_name: str | None, agent_version: str | None, reference_set: str | None
    ) -> dict[str, str]:
        """The bounded common labels (docs/exported-metrics.md) for these values."""
        return {
            "agent_name": self.limiter("agent_name", agent_name),
            "agent_version": self.limiter("agent_version", agent_version),
            "reference_set": self.limiter("reference_set", reference_set),
        }

    def record(
        self,
        result: ConversationResult,
        *,
        revision: int = 0,
        lag_s: float | None = None,
        now: float,
        conversation: Conversation | None = None,
    ) -> bool:
        """Count one evaluation. Returns False when it was ignored (a stale revision:
        one not newer than the revision already recorded for the conversation)."""
        labels = self.labels(result)
        turn_tally = Tally(turn_outcome(t) for t in result.turns)
        added = self._add_to_windows(result, labels, turn_tally, revision, now)
        if not added.accepted:
            self.ignored.add(1, {"reason": "stale_revision"})
            _log.info(
                "ignored stale revision %d of conversation %s",
                revision,
                result.conversation_id,
            )
            return False
        if added.replaced and added.previous_key is not None:
            self._supersede(added.previous_key, added.previous_tag)
        self.conversations.add(1, {**labels, "outcome": result.outcome.value})
        for outcome, count in turn_tally.items():
            self.turns.add(count, {**labels, "outcome": outcome})
        for rule, count in violation_tally(result).items():
            self.violations.add(count, {**labels, "rule": rule})
        if self.exemplars is not None:
            self._exemplars(result, labels, turn_tally, conversation, now)
        tool_calls = 0
        for turn in result.turns:
            tool_calls += len(turn.tool_calls)
            tc = turn.tool_correctness
            if tc is not None:
                for dim in ("selection", "parameters", "sequence", "utilization", "overall"):
                    self.tool_correctness.record(getattr(tc, dim), {**labels, "dimension": dim})
            if turn.trajectory is not None:
                self.trajectory_precision.record(turn.trajectory.precision, labels)
                self.trajectory_recall.record(turn.trajectory.recall, labels)
        if tool_calls:
            self.tool_calls.add(tool_calls, labels)
        if lag_s is not None and math.isfinite(lag_s):
            self.evaluation_lag.record(max(0.0, lag_s), labels)
        if self._events is not None:
            self._events.emit(result, labels, revision, conversation)
        return True

    def _add_to_windows(
        self,
        result: ConversationResult,
        labels: dict[str, str],
        turn_tally: Tally[str],
        revision: int,
        now: float,
    ) -> AddResult:
        return self._add_entry(window_entry(result, turn_tally), labels, revision, now)

    def _add_entry(
        self, entry: WindowEntry, labels: dict[str, str], revision: int, now: float
    ) -> AddResult:
        """The one way into the windows: live results and journal replays alike."""
        key: Key = (labels["agent_name"], labels["agent_version"], labels["reference_set"])
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

    def replay(self, result: ConversationResult, *, revision: int, now: float) -> bool:
        """Put an evaluation from the state file's window journal back into the windows
        (crash recovery), exactly as `record` did the first time, without counting it
        again or emitting its event: the counters and events of a previous process are
        not this process's. Idempotent: an entry the restored snapshot already holds is
        a stale revision and changes nothing. Returns whether it changed the windows.
        (Journals written before schema version 5 hold whole results.)"""
        return self.replay_entry(window_entry(result), revision=revision, now=now)

    def replay_entry(self, entry: WindowEntry, *, revision: int, now: float) -> bool:
        """`replay` of a journalled `WindowEntry` (what the journal holds since schema
        version 5): the same entry `record` added, under the labels it maps to now."""
        labels = self.common_labels(entry.agent_name, entry.agent_version, entry.reference_set)
        return self._add_entry(entry, labels, revision, now).accepted

    def _exemplars(
        self,
        result: ConversationResult,
        labels: dict[str, str],
        turn_tally: Tally[str],
        conversation: Conversation | None,
        now: float,
    ) -> None:
        """This conversation becomes the exemplar of the series it just counted in: its
        first failing turn's trace (the trace to look at), else its last trace."""
        assert self.exemplars is not None
        traces = [] if conversation is None else [t.trace_id for t in conversation.turns]
        fallback = conversation.trace_ids[-1] if conversation and conversation.trace_ids else None
        first_bad = next(
            (i for i, t in enumerate(result.turns) if t.correct is False and i < len(traces)),
            None,
        )
        trace = (traces[first_bad] if first_bad is not None else None) or fallback
        cid = result.conversation_id
        self.exemplars.observe(
            "tracepass_conversations",
            {**labels, "outcome": result.outcome.value},
            trace_id=trace,
            conversation_id=cid,
            value=1.0,
            timestamp=now,
        )
        for i, turn in enumerate(result.turns):
            outcome = turn_outcome(turn)
            if outcome in turn_tally:
                self.exemplars.observe(
                    "tracepass_turns",
                    {**labels, "outcome": outcome},
                    trace_id=(traces[i] if i < len(traces) else None) or fallback,
                    conversation_id=cid,
                    value=float(turn_tally[outcome]),
                    timestamp=now,
                )

    def _supersede(self, key: Key, tag: str) -> None:
        labels = dict(zip(LABELS, key, strict=True))
        try:
            # [outcome, turn tally] or, with violations, [outcome, turn tally, rule tally]
            outcome, turns, *rest = json.loads(tag)
            violations: dict[str, Any] = rest[0] if rest else {}
        except (ValueError, TypeError):
            _log.warning("superseded entry without a readable tag %r; not counted", tag)
            self.ignored.add(1, {"reason": "superseded_untagged"})
            return
        self.conversations_superseded.add(1, {**labels, "outcome": outcome})
        for t_outcome, count in turns.items():
            self.turns_superseded.add(int(count), {**labels, "outcome": t_outcome})
        for rule, count in violations.items():
            self.violations_superseded.add(int(count), {**labels, "rule": rule})

    def record_judge_call(self, outcome: str) -> None:
        """`LLMJudge(on_call=...)` hook. outcome: ok | retry | error | cached (the
        judge's own vocabulary, passed through)."""
        self.judge_calls.add(1, {"outcome": outcome})

    # ------------------------------------------------------------------ gauges

    def snapshot(self, *, refresh: bool = False, in_collection: bool = False) -> list[KeySnapshot]:
        """The aggregator's snapshot, cached so all gauge callbacks of one collection
        report the same state (n, c, estimates and bounds consistent with each other).
        The first gauge registered refreshes it at the start of every collection; the
        SDK runs callbacks in registration order."""
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

    def _obs_point(
        self, metric: str, *, refresh: bool = False
    ) -> Callable[[CallbackOptions], Iterable[Observation]]:
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

    def _obs_bound(
        self, metric: str, bound: str
    ) -> Callable[[CallbackOptions], Iterable[Observation]]:
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

    def _obs_counts(self, field: str) -> Callable[[CallbackOptions], Iterable[Observation]]:
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
        for ks in self.snapshot(in_collection=True):
            base = dict(zip(LABELS, ks.key, strict=True))
            for w in ks.windows:
                e1, e3 = w.estimates.get(1), w.estimates.get(3)
                if e1 is None or e3 is None:
                    continue
                tier = classify(e1.pass_at_k.plugin, e3.pass_pow_k.plugin)
                yield Observation(1.0, {**base, "window": w.window, "tier": tier.value})
