"""pass@k per agent pooled from stored results, for collectors sharing one results store.

A replica's rolling windows (what `/metrics` exports and `/api/v1/agents` shows by
default) hold only the conversations that replica evaluated. With a shared results
database (`state.results_url`) the API and UI show every replica's agents instead,
computed here from the stored results of each window: trials and passes per reference
(the tasks), summed per agent × version × reference set, estimated with the windows'
own ks, prior, credible level and `min_conversations` guard (`RollingAggregator.
estimate_rows`). Trials are as in the reference summary: pass, fail and incomplete
results that matched a reference. The CUSUM is a per-process statistic: none here.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from tracepass.collector.state import ResultsStore
from tracepass.evaluator.stats.rolling import (
    KeySnapshot,
    RollingAggregator,
    RollingConfig,
    WindowSnapshot,
)

__all__ = ["pooled_snapshots"]

Key = tuple[str, str, str]


def _label(value: str | None) -> str:
    return "" if value is None else value


def pooled_snapshots(
    results: ResultsStore, config: RollingConfig, clock: Callable[[], float] = time.time
) -> Callable[[], list[KeySnapshot]]:
    """A `snapshots` function for `ReadModel` reading `results` on every call."""
    estimator = RollingAggregator(config)

    def snapshots() -> list[KeySnapshot]:
        now = clock()
        per_window: list[dict[Key, list[tuple[float, float]]]] = []
        keys: dict[Key, None] = {}
        for _, seconds in config.windows:
            tasks: dict[Key, list[tuple[float, float]]] = {}
            for agent, version, ref_set, _ref, n, c in results.agent_counts(now - seconds):
                key = (_label(agent), _label(version), _label(ref_set))
                tasks.setdefault(key, []).append((float(n), float(c)))
                keys[key] = None
            per_window.append(tasks)
        rows = [
            (
                key,
                name,
                sum(n for n, _ in window.get(key, [])),
                sum(c for _, c in window.get(key, [])),
                window.get(key, []),
            )
            for key in keys
            for (name, _), window in zip(config.windows, per_window, strict=True)
        ]
        estimates = estimator.estimate_rows(rows)
        out: list[KeySnapshot] = []
        per_key = len(config.windows)
        for j, key in enumerate(keys):
            windows = tuple(
                WindowSnapshot(
                    rows[r][1], rows[r][2], rows[r][3], len(rows[r][4] or []), estimates[r]
                )
                for r in range(j * per_key, (j + 1) * per_key)
            )
            out.append(KeySnapshot(key, windows, 0.0, 0))
        return out

    return snapshots
