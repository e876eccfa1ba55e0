"""Everything that leaves the collector about evaluations: OpenTelemetry metrics
(`metrics.py`), `gen_ai.evaluation.result` events (`evaluation_events.py`), the OTel SDK wiring
(`telemetry.py`) and label-cardinality limits (`cardinality.py`). Operational counters of
the ingest path are `tracepass.collector.instruments` (every stage writes them)."""

from tracepass.collector.export.alert_links import (
    UIBase,
    derive_ui_base,
    register_alert_link_gauges,
)
from tracepass.collector.export.budget import register_budget_gauge
from tracepass.collector.export.consumers import (
    EventsComponent,
    FailureLogComponent,
    MetricsComponent,
)
from tracepass.collector.export.evaluation_events import EVENT_NAME, EvaluationEvents
from tracepass.collector.export.metrics import EvaluationMetrics, rolling_config
from tracepass.collector.export.outcomes import result_success, success_of, turn_outcome
from tracepass.collector.export.schema_checks import register_schema_check_counter
from tracepass.collector.export.telemetry import build_telemetry
from tracepass.collector.export.windows.judge_series import journal_entry
from tracepass.collector.export.windows.window_persistence import RollingWindows

__all__ = [
    "EVENT_NAME",
    "EvaluationEvents",
    "EvaluationMetrics",
    "EventsComponent",
    "FailureLogComponent",
    "MetricsComponent",
    "RollingWindows",
    "UIBase",
    "build_telemetry",
    "derive_ui_base",
    "journal_entry",
    "register_alert_link_gauges",
    "register_budget_gauge",
    "register_schema_check_counter",
    "result_success",
    "rolling_config",
    "success_of",
    "turn_outcome",
]
