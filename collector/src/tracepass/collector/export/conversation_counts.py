"""The per-conversation counters and histograms, and what one evaluation adds to them.

Counters are the source of truth: they are monotonic, sum across replicas, and the
pooled plug-in pass^k over any range is recomputable from them in PromQL
(docs/exported-metrics.md). Every name below is a contract with deploy/ (recording and
alert rules, dashboards): change one only together with docs/exported-metrics.md.

Revisions: a re-evaluated conversation is counted again in `tracepass_conversations`
and its previous outcome in `tracepass_conversations_superseded` (same for turns and
violations), so `conversations - superseded` is the net count.

They are light instruments exported through the provider's readers
(`preaggregated.py`), or the SDK's own when the light path cannot keep the SDK's output
(or `preaggregate=False`); one lock is taken once per conversation for all updates.
"""

from __future__ import annotations

import json
import logging
import math
from typing import Any

from opentelemetry.metrics import Meter

from tracepass.collector.export.preaggregated import HotMetrics, Instruments, SdkInstruments, attach
from tracepass.collector.export.usage_metrics import UsageMetrics
from tracepass.collector.export.windows.metric_windows import LABELS
from tracepass.evaluator.models import Conversation, ConversationResult
from tracepass.evaluator.stats.rolling import AddResult, Key

__all__ = ["DIMENSIONS", "LAG_BUCKETS", "SCORE_BUCKETS", "ConversationCounts"]

_log = logging.getLogger(__name__)

SCORE_BUCKETS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0)
LAG_BUCKETS = (0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
DIMENSIONS = ("selection", "parameters", "sequence", "utilization", "overall")
_CACHE_LIMIT = 4096  # label-key cache: cleared when full (bounded memory)


class ConversationCounts:
    """The counters and histograms of evaluated conversations (see the module doc)."""

    def __init__(self, meter: Meter, *, preaggregate: bool = True) -> None:
        hot = attach(meter) if preaggregate else None
        self.hot: HotMetrics | None = hot
        ins: Instruments = hot if hot is not None else SdkInstruments(meter)
        self.lock = ins.lock
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
        self.ignored = meter.create_counter(
            "tracepass_evaluations_ignored",
            description="Evaluation results not recorded, by reason",
        )
        self._dimension_keys: dict[Key, tuple[tuple[str, ...], ...]] = {}

    def count(
        self,
        result: ConversationResult,
        key: Key,
        outcome: str,
        turn_tally: dict[str, int],
        violations: dict[str, int],
        added: AddResult,
        lag_s: float | None,
        conversation: Conversation | None,
    ) -> None:
        """Everything one accepted evaluation adds (and, for a revision, what the entry
        it replaced subtracts), under the instruments' lock taken once."""
        with self.lock:
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
                        dimension_keys = self._dimensions(key)
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

    def count_trial(self, key: Key, outcome: str, added: AddResult) -> None:
        """A judgement's trial of its own series (`judge_series.py`): one conversation."""
        with self.lock:
            if added.replaced and added.previous_key is not None:
                self._supersede(added.previous_key, added.previous_tag)
            self.conversations.add(1, (*key, outcome))

    def _dimensions(self, key: Key) -> tuple[tuple[str, ...], ...]:
        dimension_keys = self._dimension_keys.get(key)
        if dimension_keys is None:
            dimension_keys = tuple((*key, dim) for dim in DIMENSIONS)
            if len(self._dimension_keys) >= _CACHE_LIMIT:
                self._dimension_keys.clear()
            self._dimension_keys[key] = dimension_keys
        return dimension_keys

    def _supersede(self, key: Key, tag: str) -> None:
        """Count the replaced entry's outcome, turns and violations (under `lock`)."""
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
