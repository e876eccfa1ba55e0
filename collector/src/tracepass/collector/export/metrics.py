"""Evaluation results as OpenTelemetry metrics (the events are `evaluation_events.py`).

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
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from opentelemetry._logs import Logger
from opentelemetry.metrics import CallbackOptions, Meter, Observation

from tracepass.collector.config import MetricsConfig
from tracepass.collector.export.cardinality import LabelLimiter
from tracepass.collector.export.evaluation_events import EVENT_NAME, EvaluationEvents
from tracepass.collector.export.exemplars import ExemplarStore
from tracepass.collector.export.judge_series import judgement_entries
from tracepass.collector.export.judge_spend_metrics import JudgeSpendMetrics
from tracepass.collector.export.outcomes import (
    result_success,
    success_of,
    turn_outcome,
    violation_tally,
)
from tracepass.collector.export.preaggregated import (
    HotMetrics,
    Instruments,
    SdkInstruments,
    attach,
)
from tracepass.collector.export.usage_metrics import UsageMetrics
from tracepass.collector.export.window_entry import (
    UNMATCHED_TASK,
    WindowEntry,
    task_of,
    window_entry,
)
from tracepass.evaluator.judge.spend import JudgeSpend
from tracepass.evaluator.models import Conversation, ConversationResult, Outcome
from tracepass.evaluator.stats.readiness import classify
from tracepass.evaluator.stats.rolling import (
    AddResult,
    Key,
    KeySnapshot,
    RollingAggregator,
    RollingConfig,
    StateCapture,
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
T = TypeVar("T")

SCORE_BUCKETS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0)
LAG_BUCKETS = (0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
LABELS = ("agent_name", "agent_version", "reference_set")


DIMENSIONS = ("selection", "parameters", "sequence", "utilization", "overall")
_OUTCOME_VALUES = {o: o.value for o in Outcome}  # `.value` of an enum is a slow property
_CACHE_LIMIT = 4096  # label-key and tag caches: cleared when full (bounded memory)


def _tally(outcomes: list[str]) -> dict[str, int]:
    """outcome → turns, in first-seen order (what `collections.Counter` gave)."""
    tally: dict[str, int] = {}
    for outcome in outcomes:
        tally[outcome] = tally.get(outcome, 0) + 1
    return tally


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
        preaggregate: bool = True,
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
        # The per-conversation counters and histograms: light instruments exported
        # through the provider's readers (`preaggregated.py`), or the SDK's own when
        # the light path cannot keep the SDK's output (or `preaggregate=False`).
        hot = attach(meter) if preaggregate else None
        self.hot: HotMetrics | None = hot
        ins: Instruments = hot if hot is not None else SdkInstruments(meter)
        self._hot_lock = ins.lock
        outcome = (*LABELS, "outcome")
        rule = (*LABELS, "rule")
        self.conversations = ins.counter(
            "tracepass_conversations", "Evaluated conversations, by outcome", outcome
        )
        self.conversations_superseded = ins.counter(
            "tracepass_conversations_superseded",
            "Earlier evaluations replaced by a revision, by their outcome",
            outcome,
        )
        self.turns = ins.counter("tracepass_turns", "Evaluated turns, by outcome", outcome)
        self.turns_superseded = ins.counter(
            "tracepass_turns_superseded",
            "Turns of earlier evaluations replaced by a revision, by outcome",
            outcome,
        )
        self.tool_calls = ins.counter(
            "tracepass_tool_calls", "Tool calls in evaluated turns", LABELS
        )
        self.violations = ins.counter(
            "tracepass_policy_violations",
            "Violated checks and policy rules in evaluated turns, by rule",
            rule,
        )
        self.violations_superseded = ins.counter(
            "tracepass_policy_violations_superseded",
            "Violations of earlier evaluations replaced by a revision, by rule",
            rule,
        )
        self.tool_correctness = ins.histogram(
            "tracepass_tool_correctness",
            "Per-turn tool-correctness score, by dimension",
            (*LABELS, "dimension"),
            SCORE_BUCKETS,
        )
        self.trajectory_precision = ins.histogram(
            "tracepass_trajectory_precision", "Per-turn trajectory precision", LABELS, SCORE_BUCKETS
        )
        self.trajectory_recall = ins.histogram(
            "tracepass_trajectory_recall", "Per-turn trajectory recall", LABELS, SCORE_BUCKETS
        )
        self.evaluation_lag = ins.histogram(
            "tracepass_evaluation_lag",
            "Time from a conversation's last span to its evaluation",
            LABELS,
            LAG_BUCKETS,
            unit="s",
        )
        # Tokens, model calls, cost and latency per conversation (usage_metrics.py).
        self.usage = UsageMetrics(ins, LABELS)
        # Rare: through the SDK.
        self.judge_calls = m.create_counter(
            "tracepass_judge_calls", description="LLM judge calls, by outcome"
        )
        # The judge's own tokens and cost (judge_spend_metrics.py).
        self.judge_spend = JudgeSpendMetrics(m)
        self.label_overflow = m.create_counter(
            "tracepass_label_overflow",
            description="Label values collapsed into 'other' by the cardinality limit",
        )
        self.ignored = m.create_counter(
            "tracepass_evaluations_ignored",
            description="Evaluation results not recorded, by reason",
        )
        self._dimension_keys: dict[Key, tuple[tuple[str, ...], ...]] = {}
        self._tags: dict[tuple[Any, ...], str] = {}
        self.limiter = LabelLimiter(config.label_limit, self.label_overflow)
        for key in self.aggregator:
            for label, value in zip(LABELS, key, strict=True):
                self.limiter.seed(label, [value])
            self.limiter.combination(key, count=False)
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
            ("tracepass_window_entries", _window_entries(self), "Entries the rolling windows hold (alive or superseded), all keys"),
        ):  # fmt: skip
            m.create_observable_gauge(name, callbacks=[fn], description=desc)

    # ------------------------------------------------------------------ recording

    def key(self, result: ConversationResult) -> Key:
        """The bounded common label values (agent_name, agent_version, reference_set)."""
        limiter = self.limiter
        return limiter.combination(
            (
                limiter("agent_name", result.agent_name),
                limiter("agent_version", result.agent_version),
                limiter("reference_set", result.reference_set),
            )
        )

    def common_labels(
        self, agent_name: str | None, agent_version: str | None, reference_set: str | None
    ) -> dict[str, str]:
        """The bounded common labels (docs/exported-metrics.md) for these values."""
        limiter = self.limiter
        key = limiter.combination(
            (
                limiter("agent_name", agent_name),
                limiter("agent_version", agent_version),
                limiter("reference_set", reference_set),
            )
        )
        return dict(zip(LABELS, key, strict=True))

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
        key = self.key(result)
        outcome = _OUTCOME_VALUES[result.outcome]
        outcomes = [turn_outcome(t) for t in result.turns]
        turn_tally = _tally(outcomes)
        violations = violation_tally(result)
        entry = window_entry(result, tag=self._tag(outcome, turn_tally, violations))
        added = self._add_to_windows(key, entry, revision, now)
        if not added.accepted:
            self.ignored.add(1, {"reason": "stale_revision"})
            _log.info(
                "ignored stale revision %d of conversation %s",
                revision,
                result.conversation_id,
            )
            return False
        with self._hot_lock:
            if added.replaced and added.previous_key is not None:
                self._supersede(added.previous_key, added.previous_tag)
            self.conversations.add(1, (*key, outcome))
            for turn_outcome_, count in turn_tally.items():
                self.turns.add(count, (*key, turn_outcome_))
            for rule, count in violations.items():
                self.violations.add(count, (*key, rule))
            tool_calls = 0
            dimension_keys = None
            tool_correctness = self.tool_correctness.record
            precision = self.trajectory_precision.record
            recall = self.trajectory_recall.record
            for turn in result.turns:
                tool_calls += len(turn.tool_calls)
                tc = turn.tool_correctness
                if tc is not None:
                    if dimension_keys is None:
                        dimension_keys = self._dimension_keys.get(key)
                        if dimension_keys is None:
                            dimension_keys = tuple((*key, dim) for dim in DIMENSIONS)
                            if len(self._dimension_keys) >= _CACHE_LIMIT:
                                self._dimension_keys.clear()
                            self._dimension_keys[key] = dimension_keys
                    k_sel, k_par, k_seq, k_use, k_all = dimension_keys
                    tool_correctness(tc.selection, k_sel)
                    tool_correctness(tc.parameters, k_par)
                    tool_correctness(tc.sequence, k_seq)
                    tool_correctness(tc.utilization, k_use)
                    tool_correctness(tc.overall, k_all)
                trajectory = turn.trajectory
                if trajectory is not None:
                    precision(trajectory.precision, key)
                    recall(trajectory.recall, key)
            if tool_calls:
                self.tool_calls.add(tool_calls, key)
            if lag_s is not None and math.isfinite(lag_s):
                self.evaluation_lag.record(max(0.0, lag_s), key)
            if conversation is not None and not added.replaced:
                self.usage.record(key, conversation)
        if self.exemplars is not None:
            self._exemplars(result, key, outcome, outcomes, turn_tally, conversation, now)
        if self._events is not None:
            labels = dict(zip(LABELS, key, strict=True))
            self._events.emit(result, labels, revision, conversation)
        if result.judgements:
            self._record_judgements(result, revision, now, conversation)
        return True

    def _record_judgements(
        self,
        result: ConversationResult,
        revision: int,
        now: float,
        conversation: Conversation | None,
    ) -> None:
        """Each conversation judge's verdict as a trial of its series
        `reference_set="judge:<name>"` (`judge_series.py`): windows, counter, exemplar."""
        trace = None
        if conversation is not None and conversation.trace_ids:
            trace = conversation.trace_ids[-1]
        for entry in judgement_entries(result):
            key = self.key_of(entry)
            added = self._add_to_windows(key, entry, revision, now)
            if not added.accepted:
                continue
            outcome = json.loads(entry.tag)[0]
            with self._hot_lock:
                if added.replaced and added.previous_key is not None:
                    self._supersede(added.previous_key, added.previous_tag)
                self.conversations.add(1, (*key, outcome))
            if self.exemplars is not None:
                self.exemplars.observe_many(
                    [("tracepass_conversations", (*key, outcome), trace, 1.0)],
                    conversation_id=result.conversation_id,
                    timestamp=now,
                )

    def key_of(self, entry: WindowEntry) -> Key:
        """The bounded label values of a window entry (as `key` for a result)."""
        limiter = self.limiter
        return limiter.combination(
            (
                limiter("agent_name", entry.agent_name),
                limiter("agent_version", entry.agent_version),
                limiter("reference_set", entry.reference_set),
            )
        )

    def _add_to_windows(self, key: Key, entry: WindowEntry, revision: int, now: float) -> AddResult:
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

    def _tag(self, outcome: str, turn_tally: dict[str, int], violations: dict[str, int]) -> str:
        """The window entry's tag: `[outcome, turn tally]` or, with violations,
        `[outcome, turn tally, rule tally]` as compact JSON (read back by `_supersede`
        and kept in the state file). Few distinct tags exist: cached."""
        cache_key = (outcome, *turn_tally.items(), None, *violations.items())
        tag = self._tags.get(cache_key)
        if tag is None:
            tag_parts: list[Any] = [outcome, turn_tally]
            if violations:
                tag_parts.append(violations)
            tag = json.dumps(tag_parts, separators=(",", ":"))
            if len(self._tags) >= _CACHE_LIMIT:
                self._tags.clear()
            self._tags[cache_key] = tag
        return tag

    def restore_windows(self, aggregator: RollingAggregator) -> None:
        """Adopt windows restored from a snapshot (`export/windows.py`, before the first
        result): their label values count against the cardinality limit as before."""
        with self._lock:
            self.aggregator = aggregator
            for key in aggregator:
                for label, value in zip(LABELS, key, strict=True):
                    self.limiter.seed(label, [value])
            self._dirty = True

    def capture_windows(self, position: Callable[[], T]) -> tuple[StateCapture, T]:
        """A point-in-time copy of the windows and `position()` read under the same lock
        every writer of the windows takes (what `export/windows.py` persists: the copy
        and the journal position it includes)."""
        with self._lock:
            return self.aggregator.capture(), position()

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
        return self._add_to_windows(self.key_of(entry), entry, revision, now).accepted

    def _exemplars(
        self,
        result: ConversationResult,
        key: Key,
        outcome: str,
        outcomes: list[str],
        turn_tally: dict[str, int],
        conversation: Conversation | None,
        now: float,
    ) -> None:
        """This conversation becomes the exemplar of the series it just counted in: its
        first failing turn's trace (the trace to look at), else its last trace."""
        assert self.exemplars is not None
        if conversation is None:
            traces: list[str | None] = []
            fallback = None
        else:
            traces = [t.trace_id for t in conversation.turns]
            fallback = conversation.trace_ids[-1] if conversation.trace_ids else None
        n = len(traces)
        trace = fallback
        for i, turn in enumerate(result.turns):
            if turn.correct is False and i < n:
                trace = traces[i] or fallback
                break
        series = [("tracepass_conversations", (*key, outcome), trace, 1.0)]
        for i, turn_outcome_ in enumerate(outcomes):
            series.append(
                (
                    "tracepass_turns",
                    (*key, turn_outcome_),
                    (traces[i] if i < n else None) or fallback,
                    float(turn_tally[turn_outcome_]),
                )
            )
        self.exemplars.observe_many(series, conversation_id=result.conversation_id, timestamp=now)

    def _supersede(self, key: Key, tag: str) -> None:
        """Count the replaced entry's outcome, turns and violations (under `_hot_lock`)."""
        try:
            # [outcome, turn tally] or, with violations, [outcome, turn tally, rule tally]
            outcome, turns, *rest = json.loads(tag)
            violations: dict[str, Any] = rest[0] if rest else {}
        except (ValueError, TypeError):
            _log.warning("superseded entry without a readable tag %r; not counted", tag)
            self.ignored.add(1, {"reason": "superseded_untagged"})
            return
        self.conversations_superseded.add(1, (*key, outcome))
        for t_outcome, count in turns.items():
            self.turns_superseded.add(int(count), (*key, t_outcome))
        for rule, count in violations.items():
            self.violations_superseded.add(int(count), (*key, rule))

    def record_judge_call(self, outcome: str) -> None:
        """`LLMJudge(on_call=...)` hook. outcome: ok | retry | error | cached (the
        judge's own vocabulary, passed through)."""
        self.judge_calls.add(1, {"outcome": outcome})

    def record_judge_spend(self, spend: JudgeSpend) -> None:
        """`LLMJudge(on_spend=...)` hook: one judge model call's tokens and cost."""
        self.judge_spend.record(spend)

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


def _window_entries(em: EvaluationMetrics) -> Callable[[CallbackOptions], Iterable[Observation]]:
    """The `tracepass_window_entries` callback: what the rolling windows hold in memory
    (one entry per evaluated conversation and key, kept for the longest window); with
    `tracepass_retained_spans`, what grows with traffic."""

    def observe(_: CallbackOptions) -> Iterable[Observation]:
        with em._lock:  # the aggregator is written under it (`_add_to_windows`)
            entries = len(em.aggregator)
        yield Observation(float(entries))

    return observe
