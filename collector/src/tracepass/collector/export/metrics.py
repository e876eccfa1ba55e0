"""Evaluation results as OpenTelemetry metrics (the events are `evaluation_events.py`).

`EvaluationMetrics` is what the result chain's metrics link calls for every evaluation;
it composes the collaborators that each own one part: the counters and histograms
(`conversation_counts.py`: the source of truth, summable across replicas), the rolling
windows and their gauges (`metric_windows.py`: what PromQL cannot compute — unbiased
per-task estimators, exact Beta credible bounds, CUSUM — from one replica's
RollingAggregator), the exemplars (`conversation_exemplars.py`) and the judge series
(`judge_series.py`).

Every metric name is a contract with deploy/ (recording and alert rules, dashboards):
change one only together with docs/exported-metrics.md.

Revisions: a re-evaluated conversation is counted again in `tracepass_conversations`
and its previous outcome in `tracepass_conversations_superseded` (same for turns), so
`conversations - superseded` is the net count; the RollingAggregator replaces the
earlier outcome in its windows.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable

from opentelemetry._logs import Logger
from opentelemetry.metrics import Meter

from tracepass.collector.config import MetricsConfig
from tracepass.collector.export.cardinality import LabelLimiter
from tracepass.collector.export.conversation_counts import ConversationCounts
from tracepass.collector.export.conversation_exemplars import observe_conversation
from tracepass.collector.export.evaluation_events import EVENT_NAME, EvaluationEvents
from tracepass.collector.export.exemplars import ExemplarStore
from tracepass.collector.export.judge_spend_metrics import JudgeSpendMetrics
from tracepass.collector.export.outcomes import (
    result_success,
    success_of,
    turn_outcome,
    violation_tally,
)
from tracepass.collector.export.preaggregated import HotMetrics
from tracepass.collector.export.windows.judge_series import judgement_entries
from tracepass.collector.export.windows.metric_windows import LABELS, MetricWindows
from tracepass.collector.export.windows.window_entry import (
    UNMATCHED_TASK,
    WindowEntry,
    entry_tag,
    task_of,
    turn_tally,
    window_entry,
)
from tracepass.evaluator.judge.spend import JudgeSpend
from tracepass.evaluator.models import Conversation, ConversationResult, Outcome
from tracepass.evaluator.stats.rolling import (
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

_OUTCOME_VALUES = {o: o.value for o in Outcome}  # `.value` of an enum is a slow property


DEFAULT_REVISION_HORIZON_S = RollingConfig().revision_horizon_s


def window_bucket_s(config: MetricsConfig) -> float:
    """The default bucket: a minute, or a 60th of the shortest window if shorter."""
    shortest = min((float(w.seconds) for w in config.windows), default=3600.0)
    return min(60.0, shortest / 60)


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
        bucket_s=config.window_bucket_s or window_bucket_s(config),
        # Unset outside a CollectorConfig (which derives it from the assembly section).
        revision_horizon_s=config.revision_horizon_s or DEFAULT_REVISION_HORIZON_S,
    )


class EvaluationMetrics:
    """What every evaluated conversation (and revision) is counted in: `record()` adds
    it to the rolling windows (`metric_windows.py`, whose gauges export them) and, unless
    it is a stale revision, to the counters and histograms (`conversation_counts.py`),
    the exemplars (`conversation_exemplars.py`) and the events (`evaluation_events.py`)."""

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
        self.clock = clock
        self.windows = MetricWindows(
            aggregator or RollingAggregator(rolling_config(config)),
            clock,
            config.readiness_rule(),
        )
        self._events = (
            EvaluationEvents(event_logger)
            if event_logger is not None and config.emit_evaluation_events
            else None
        )
        self.counts = ConversationCounts(meter, preaggregate=preaggregate)
        self.hot: HotMetrics | None = self.counts.hot
        # Rare: through the SDK.
        self.judge_calls = meter.create_counter(
            "tracepass_judge_calls", description="LLM judge calls, by outcome"
        )
        # The judge's own tokens and cost (judge_spend_metrics.py).
        self.judge_spend = JudgeSpendMetrics(meter)
        self.label_overflow = meter.create_counter(
            "tracepass_label_overflow",
            description="Label values collapsed into 'other' by the cardinality limit",
        )
        self.limiter = LabelLimiter(config.label_limit, self.label_overflow)
        self._seed_limiter()
        self.windows.register_gauges(meter)

    @property
    def aggregator(self) -> RollingAggregator:
        return self.windows.aggregator

    def _seed_limiter(self) -> None:
        """The windows' label values count against the cardinality limit (restored
        windows included)."""
        for key in self.windows:
            for label, value in zip(LABELS, key, strict=True):
                self.limiter.seed(label, [value])
            self.limiter.combination(key, count=False)

    # ------------------------------------------------------------------ recording

    def key(self, result: ConversationResult) -> Key:
        """The bounded common label values (agent_name, agent_version, reference_set)."""
        return self._bounded(result.agent_name, result.agent_version, result.reference_set)

    def key_of(self, entry: WindowEntry) -> Key:
        """The bounded label values of a window entry (as `key` for a result)."""
        return self._bounded(entry.agent_name, entry.agent_version, entry.reference_set)

    def _bounded(self, agent_name: str | None, agent_version: str | None, rset: str | None) -> Key:
        limiter = self.limiter
        return limiter.combination(
            (
                limiter("agent_name", agent_name),
                limiter("agent_version", agent_version),
                limiter("reference_set", rset),
            )
        )

    def common_labels(
        self, agent_name: str | None, agent_version: str | None, reference_set: str | None
    ) -> dict[str, str]:
        """The bounded common labels (docs/exported-metrics.md) for these values."""
        return dict(
            zip(LABELS, self._bounded(agent_name, agent_version, reference_set), strict=True)
        )

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
        tally = turn_tally(outcomes)
        violations = violation_tally(result)
        entry = window_entry(result, tag=entry_tag(outcome, tally, violations))
        added = self.windows.add(key, entry, revision, now)
        if not added.accepted:
            self.counts.ignored.add(1, {"reason": "stale_revision"})
            _log.info(
                "ignored stale revision %d of conversation %s",
                revision,
                result.conversation_id,
            )
            return False
        self.counts.count(result, key, outcome, tally, violations, added, lag_s, conversation)
        if self.exemplars is not None:
            observe_conversation(
                self.exemplars, result, key, outcome, outcomes, tally, conversation, now
            )
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
            added = self.windows.add(key, entry, revision, now)
            if not added.accepted:
                continue
            outcome = json.loads(entry.tag)[0]
            self.counts.count_trial(key, outcome, added)
            if self.exemplars is not None:
                self.exemplars.observe_many(
                    [("tracepass_conversations", (*key, outcome), trace, 1.0)],
                    conversation_id=result.conversation_id,
                    timestamp=now,
                )

    def restore_failure_examples(
        self, rows: Iterable[tuple[str | None, str | None, str | None, str, str]]
    ) -> None:
        """Stored latest failures (agent, version, reference set, conversation id, trace
        id) as the exemplars of their `outcome="fail"` series, so the alert's example
        trace (`tracepass_failure_example`) survives a restart; a live failure replaces
        each at once."""
        if self.exemplars is None:
            return
        now = self.clock()
        for agent, version, rset, conversation_id, trace_id in rows:
            key = self._bounded(agent, version, rset)
            self.exemplars.observe_many(
                [("tracepass_conversations", (*key, "fail"), trace_id, 1.0)],
                conversation_id=conversation_id,
                timestamp=now,
            )

    def seed_labels(self, keys: Iterable[Key]) -> None:
        """Keys restored into the windows (`export/windows/`) count against the
        cardinality limit as before the restart."""
        for key in keys:
            for label, value in zip(LABELS, key, strict=True):
                self.limiter.seed(label, [value])

    def record_judge_call(self, outcome: str) -> None:
        """`LLMJudge(on_call=...)` hook. outcome: ok | retry | error | cached (the
        judge's own vocabulary, passed through)."""
        self.judge_calls.add(1, {"outcome": outcome})

    def record_judge_spend(self, spend: JudgeSpend) -> None:
        """`LLMJudge(on_spend=...)` hook: one judge model call's tokens and cost."""
        self.judge_spend.record(spend)

    def snapshot(self, *, refresh: bool = False, in_collection: bool = False) -> list[KeySnapshot]:
        """The windows' snapshot as the gauges report it (`MetricWindows.snapshot`)."""
        return self.windows.snapshot(refresh=refresh, in_collection=in_collection)
