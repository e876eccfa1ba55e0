"""Everything that leaves the collector about evaluations: OpenTelemetry metrics
(`metrics.py`), `gen_ai.evaluation.result` events (`evaluation_events.py`), the OTel SDK wiring
(`telemetry.py`) and label-cardinality limits (`cardinality.py`). Operational counters of
the ingest path are `tracepass.collector.instruments` (every stage writes them)."""

from tracepass.collector.export.evaluation_events import EVENT_NAME, EvaluationEvents
from tracepass.collector.export.metrics import EvaluationMetrics, rolling_config
from tracepass.collector.export.outcomes import result_success, success_of, turn_outcome

__all__ = [
    "EVENT_NAME",
    "EvaluationEvents",
    "EvaluationMetrics",
    "result_success",
    "rolling_config",
    "success_of",
    "turn_outcome",
]
