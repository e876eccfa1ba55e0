"""What the list API and the web UI read, as JSON-ready dicts: conversation lists from
the state file's indexed columns, per-reference pass@1 from the same rows, and the
rolling aggregator's windows (what /metrics exports) per agent × version × reference set.

Both the HTTP handlers (`routes.py`) and the UI render these dicts, so a number on a
page is always the number the API returns. The JSON field names are a contract
(docs/api.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from tracepass.collector.api.params import (
    ParamError,
    format_time,
    parse_list_query,
)
from tracepass.collector.api.query_guard import QueryGuard
from tracepass.collector.state import ResultRow, ResultsStore, encode_cursor
from tracepass.evaluator.cost_latency import version_figures
from tracepass.evaluator.scoring.explain import natural_key
from tracepass.evaluator.stats import passk
from tracepass.evaluator.stats.rolling import KeySnapshot, RollingConfig

__all__ = ["ReadModel", "natural_key", "row_json"]

Snapshots = Callable[[], Sequence[KeySnapshot]]
T = TypeVar("T")


def row_json(row: ResultRow) -> dict[str, Any]:
    return {
        "conversation_id": row.conversation_id,
        "agent_name": row.agent_name,
        "agent_version": row.agent_version,
        "reference_set": row.reference_set,
        "reference_id": row.reference_id,
        "outcome": row.outcome,
        "revision": row.revision,
        "completed_at": format_time(row.completed_at),
        "turns": row.turns,
        "failed_turns": row.failed_turns,
        "reasons": row.reasons,
        "trace_ids": row.trace_ids,
        "cost_usd": row.cost_usd,
        "duration_s": row.duration_s,
    }


def _quantity(q: passk.PassKEstimate) -> dict[str, float | None]:
    return {
        "plugin": q.plugin,
        "unbiased": q.unbiased,
        "mean": q.mean,
        "lower": q.lower,
        "upper": q.upper,
    }


def _interval(estimate: passk.PassKEstimate) -> dict[str, float | None]:
    return {"mean": estimate.mean, "lower": estimate.lower, "upper": estimate.upper}


class ReadModel:
    """Read-only queries over the state file and the rolling windows. `store` is None
    when the collector runs without a state file (the list endpoints then answer 503)."""

    def __init__(
        self,
        store: ResultsStore | None,
        snapshots: Snapshots,
        rolling: RollingConfig,
        *,
        clock: Callable[[], float] = time.time,
        query_timeout_s: float = 10.0,
    ) -> None:
        self.store = store
        self.snapshots = snapshots
        self.rolling = rolling
        self.clock = clock
        self.guard = QueryGuard(
            lambda: store.read_connection() if store is not None else None,
            time_limit_s=query_timeout_s,
        )

    async def run(self, compute: Callable[[], T]) -> T:
        """`compute` (a read of this model) off the event loop, under the time limit:
        raises `QueryRefused` (503 busy / 504 too slow) besides its own errors."""
        return await self.guard.run(compute)

    # ------------------------------------------------------------------ conversations

    def conversations(self, params: Mapping[str, str]) -> dict[str, Any]:
        """`GET /api/v1/conversations`. Raises ParamError for a bad parameter."""
        query = parse_list_query(params, self.clock)
        store = self._store()
        rows, nxt = store.list_results(query.where, limit=query.limit, cursor=query.cursor)
        return {
            "conversations": [row_json(r) for r in rows],
            "next_cursor": None if nxt is None else encode_cursor(*nxt),
        }

    def _store(self) -> ResultsStore:
        if self.store is None:
            raise LookupError("this collector keeps no state file (state.path)")
        return self.store

    # ------------------------------------------------------------------ references

    def window_seconds(self, name: str) -> float:
        for window, seconds in self.rolling.windows:
            if window == name:
                return seconds
        names = ", ".join(w for w, _ in self.rolling.windows)
        raise ParamError("window", f"{name!r} is not a configured window ({names})")

    def reference_summary(self, params: Mapping[str, str]) -> dict[str, Any]:
        """`GET /api/v1/references/summary`: per reference id, trials, passes and pass@1
        with its credible interval (the evaluator's Beta posterior, same prior and level
        as the metrics) for `agent_version` and, when given, `baseline_version`."""
        window = params.get("window") or self.rolling.windows[0][0]
        since = self.clock() - self.window_seconds(window)
        agent = params.get("agent_name") or None
        version = params.get("agent_version") or None
        baseline = params.get("baseline_version") or None
        reference_set = params.get("reference_set") or None
        store = self._store()
        current = store.reference_counts(
            since, agent_name=agent, agent_version=version, reference_set=reference_set
        )
        base = (
            store.reference_counts(
                since, agent_name=agent, agent_version=baseline, reference_set=reference_set
            )
            if baseline is not None
            else {}
        )
        rows = []
        for ref in sorted(set(current) | set(base), key=natural_key):
            entry = self._counts_json(*current.get(ref, (0, 0)))
            entry = {"reference_id": ref, **entry}
            if baseline is not None:
                entry["baseline"] = self._counts_json(*base.get(ref, (0, 0)))
                now_mean = entry["pass_at_1"]["mean"]
                then_mean = entry["baseline"]["pass_at_1"]["mean"]
                entry["delta"] = (
                    None if now_mean is None or then_mean is None else now_mean - then_mean
                )
            rows.append(entry)
        if baseline is not None:
            # Biggest drop first: the question is "which tasks regressed".
            rows.sort(key=lambda r: (r["delta"] is None, r["delta"] or 0.0))
        return {
            "agent_name": agent,
            "agent_version": version,
            "baseline_version": baseline,
            "reference_set": reference_set,
            "window": window,
            "level": self.rolling.level,
            "references": rows,
            "versions": self.version_summary(since, window, agent, reference_set),
        }

    def version_summary(
        self, since: float, window: str, agent: str | None, reference_set: str | None
    ) -> list[dict[str, Any]]:
        """Per agent version: cost per conversation (mean, p95, total over the priced
        ones), wall latency p50/p95 (nearest rank), next to pass^k (mean, this window,
        from the rolling windows; summed over reference sets it is not: one entry per
        set when `reference_set` is not given)."""
        figures = self._store().version_costs(since, agent_name=agent, reference_set=reference_set)
        pass_pow: dict[tuple[str | None, str | None], dict[str, Any]] = {}
        for snap in self.snapshots():
            name, ver, snap_set = snap.key
            if (agent is not None and name != agent) or (
                reference_set is not None and snap_set != reference_set
            ):
                continue
            for w in snap.windows:
                if w.window == window:
                    entry = pass_pow.setdefault((name, ver), {})
                    entry[snap_set] = {
                        str(k): (e.pass_pow_k.mean if w.sufficient else None)
                        for k, e in w.estimates.items()
                    }
        out = []
        for (agent_name, agent_version), (costs, durations) in sorted(
            figures.items(),
            key=lambda kv: (natural_key(kv[0][0] or ""), natural_key(kv[0][1] or "")),
        ):
            out.append(
                {
                    "agent_name": agent_name,
                    "agent_version": agent_version,
                    **version_figures(costs, durations).model_dump(mode="json"),
                    "pass_pow_k": pass_pow.get((agent_name, agent_version), {}),
                }
            )
        return out

    def _counts_json(self, trials: int, passes: int) -> dict[str, Any]:
        pair = passk.estimate(trials, passes, 1, prior=self.rolling.prior, level=self.rolling.level)
        return {"trials": trials, "passes": passes, "pass_at_1": _interval(pair.pass_at_k)}

    # ------------------------------------------------------------------ agents

    def agents(self) -> dict[str, Any]:
        """`GET /api/v1/agents`: every agent × version × reference set the rolling
        aggregator holds, with n, c and, once n reaches `min_conversations`, pass@k and
        pass^k with their credible bounds per window (the /metrics gauges as JSON)."""
        out = []
        for snap in sorted(self.snapshots(), key=lambda s: tuple(natural_key(x) for x in s.key)):
            name, version, reference_set = snap.key
            windows: dict[str, Any] = {}
            for w in snap.windows:
                windows[w.window] = {
                    "n": w.n,
                    "c": w.c,
                    "tasks": w.tasks,
                    "sufficient": w.sufficient,
                    "pass_at_k": {str(k): _quantity(e.pass_at_k) for k, e in w.estimates.items()},
                    "pass_pow_k": {str(k): _quantity(e.pass_pow_k) for k, e in w.estimates.items()},
                }
            out.append(
                {
                    "agent_name": name,
                    "agent_version": version,
                    "reference_set": reference_set,
                    "cusum": snap.cusum if snap.cusum_observations else None,
                    "windows": windows,
                }
            )
        return {
            "level": self.rolling.level,
            "ks": list(self.rolling.ks),
            "min_conversations": self.rolling.min_conversations,
            "agents": out,
        }
