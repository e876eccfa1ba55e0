"""The rolling windows' room in the exporter: what one evaluation puts into them
(`window_entry.py`, with conversation judges' trials: `judge_series.py`), the windows
behind their lock with their gauges (`metric_windows.py`), and their durable life —
restore, journal replay, persist — as one component of the result chain
(`window_persistence.py`). The windows themselves (buckets, estimators, state format)
are the evaluator's `stats/rolling.py`.
"""

from tracepass.collector.export.windows.judge_series import journal_entry
from tracepass.collector.export.windows.metric_windows import LABELS, MetricWindows
from tracepass.collector.export.windows.window_entry import WindowEntry, window_entry
from tracepass.collector.export.windows.window_persistence import (
    AGGREGATOR_BLOB,
    RollingWindows,
    replay_entry,
    replay_result,
)

__all__ = [
    "AGGREGATOR_BLOB",
    "LABELS",
    "MetricWindows",
    "RollingWindows",
    "WindowEntry",
    "journal_entry",
    "replay_entry",
    "replay_result",
    "window_entry",
]
