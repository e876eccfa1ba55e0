"""Join GenAI events received as log records (EVENT records) to the spans they belong to.

An EVENT record names its span in `parent_span_id` (see `normalize/logs.py`). Logs and
traces arrive independently, so the join happens here, when a conversation is built
from whatever records it holds: the span's record gets the events' content for the
fields its own attributes and span events left empty. Records are never changed in
place (the assembler keeps them for re-evaluation): a joined span is a copy.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import MutableMapping

from tracepass.collector.normalize import SOURCE_LOG, apply_events, event_of
from tracepass.collector.records import RecordKind, SpanRecord

SpanKey = tuple[str, str]


def join_log_events(index: MutableMapping[SpanKey, SpanRecord]) -> int:
    """Replace, in `index`, each span record that has EVENT records with a copy that
    holds their content; returns how many events found no span (yet)."""
    pending: dict[SpanKey, list[SpanRecord]] = defaultdict(list)
    for rec in index.values():
        if rec.kind is RecordKind.EVENT and rec.parent_span_id is not None:
            pending[(rec.trace_id, rec.parent_span_id)].append(rec)
    orphans = 0
    for key, event_records in pending.items():
        target = index.get(key)
        if target is None or target.kind is RecordKind.EVENT:
            orphans += len(event_records)
            continue
        event_records.sort(key=lambda r: (r.start_ns, r.span_id))
        events = [ev for r in event_records if (ev := event_of(r)) is not None]
        joined = dataclasses.replace(target, attributes=dict(target.attributes))
        sources = joined.attributes.get("tracepass.sources")
        if isinstance(sources, dict):
            joined.attributes["tracepass.sources"] = dict(sources)
        if apply_events(joined, events, SOURCE_LOG):
            index[key] = joined
    return orphans
