"""Re-link spans that a framework SDK started as separate traces but tied by run ids.

Why: some SDKs (Grafana's agento11y) start every span detached, as the root of its own
trace, and record the framework's run tree as `run_id` / `parent_run_id` attributes
instead (the normalizing adapter keeps them as `RUN_IDS_ATTR`). Read by trace, each model
call would be a turn of its own. Here every record whose parent run is in the
conversation moves into the trace of its run's root, as a child of its parent run's
span, so the turn is the run's root as for any other stack.

The records are copies (records are shared and never changed in place); the original
trace ids stay in the conversation's `trace_ids` (the caller reads them first).
"""

from __future__ import annotations

import dataclasses
from collections.abc import MutableMapping

from tracepass.collector.normalize import RUN_IDS_ATTR
from tracepass.collector.records import SpanRecord

SpanKey = tuple[str, str]
MAX_DEPTH = 512


def _ids(rec: SpanRecord) -> tuple[str, str | None] | None:
    ids = rec.attributes.get(RUN_IDS_ATTR)
    if isinstance(ids, list | tuple) and len(ids) == 2 and isinstance(ids[0], str):
        parent = ids[1] if isinstance(ids[1], str) else None
        return ids[0], parent
    return None


def link_runs(index: MutableMapping[SpanKey, SpanRecord]) -> bool:
    """Move each record with a known parent run under it, in its root run's trace;
    whether anything moved."""
    runs: dict[str, SpanRecord] = {}
    parents: dict[str, str] = {}  # span id → parent run id
    for rec in index.values():
        ids = _ids(rec)
        if ids is None:
            continue
        run_id, parent = ids
        runs.setdefault(run_id, rec)
        if parent is not None:
            parents[rec.span_id] = parent
    if not parents:
        return False

    def root_trace(rec: SpanRecord) -> str:
        node = rec
        for _ in range(MAX_DEPTH):
            parent_run = parents.get(node.span_id)
            above = runs.get(parent_run) if parent_run is not None else None
            if above is None or above is node:
                return node.trace_id
            node = above
        return node.trace_id

    moved: list[tuple[SpanKey, SpanRecord]] = []
    for key, rec in index.items():
        parent_run = parents.get(rec.span_id)
        above = runs.get(parent_run) if parent_run is not None else None
        if above is None or above is rec:
            continue
        moved.append(
            (
                key,
                dataclasses.replace(rec, trace_id=root_trace(rec), parent_span_id=above.span_id),
            )
        )
    for key, _ in moved:
        del index[key]
    for _, rec in moved:
        index.setdefault((rec.trace_id, rec.span_id), rec)
    return bool(moved)
