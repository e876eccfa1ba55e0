"""The export stage's result consumers as chain links (`pipeline/components.py`):
the metrics (counters, histograms, exemplars, the rolling windows), the
`gen_ai.evaluation.result` events and the failure log line.

The metrics link runs first of the three: a stale revision (one not newer than what the
windows already hold) is not counted, and it says so in the `ResultInfo` it hands on
(`stale=True`), so the events and the failure log skip it too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from tracepass.collector.export.evaluation_events import EvaluationEvents
from tracepass.collector.export.failure_log import log_failure
from tracepass.collector.export.metrics import EvaluationMetrics
from tracepass.collector.pipeline import ResultComponent, ResultInfo
from tracepass.evaluator.models import ConversationResult

__all__ = ["EventsComponent", "FailureLogComponent", "MetricsComponent"]


class MetricsComponent(ResultComponent):
    name = "metrics"

    def __init__(self, metrics: EvaluationMetrics) -> None:
        self.metrics = metrics
        self.recorded = 0  # evaluations counted (stale revisions excluded)

    def on_result(self, result: ConversationResult, info: ResultInfo) -> ResultInfo | None:
        recorded = self.metrics.record(
            result,
            revision=info.revision,
            lag_s=info.lag_s,
            now=info.now,
            conversation=info.conversation,
        )
        if not recorded:
            return dataclasses.replace(info, stale=True)
        self.recorded += 1
        return None


class EventsComponent(ResultComponent):
    """One `gen_ai.evaluation.result` event per evaluation (per turn), labelled with the
    bounded common labels the metrics use."""

    name = "evaluation events"

    def __init__(
        self,
        events: EvaluationEvents,
        labels: Callable[[str | None, str | None, str | None], dict[str, str]],
    ) -> None:
        self.events = events
        self.labels = labels

    def on_result(self, result: ConversationResult, info: ResultInfo) -> None:
        if info.stale:
            return
        labels = self.labels(result.agent_name, result.agent_version, result.reference_set)
        self.events.emit(result, labels, info.revision, info.conversation)


class FailureLogComponent(ResultComponent):
    """The `conversation_failed` log line (`failure_log.py`)."""

    name = "failure log"

    def on_result(self, result: ConversationResult, info: ResultInfo) -> None:
        if not info.stale:
            log_failure(result, info.conversation, info.revision)
