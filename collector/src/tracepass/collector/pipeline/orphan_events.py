"""Back-pressure for GenAI log events whose spans have not arrived ("orphans").

Events usually arrive before their span (they are emitted while it runs; the span is
exported when it ends), so the assembler holds them in buffers of their own with their
own budget (`assembly.max_orphan_events`, `assembly/assembler.py`), the oldest given up
first. What that budget cannot absorb is one request holding more orphans than the whole
budget: it would drop every orphan held (legitimate ones among them) and then most of
its own. Such a request is refused with a retryable 503 before anything is buffered,
as a traces request that would evict more conversations than the backlog takes is
(before: one 8 MB `/v1/logs` of 100k orphans was answered 200, stalled `/healthz` for
seconds and evicted every open conversation).
"""

from __future__ import annotations

from collections.abc import Sequence

from tracepass.collector.assembly import Assembler
from tracepass.collector.receiver import Overloaded
from tracepass.collector.records import RecordKind, SpanRecord

__all__ = ["check_orphan_events", "is_event"]


def is_event(record: SpanRecord) -> bool:
    return record.kind is RecordKind.EVENT


def check_orphan_events(assembler: Assembler, records: Sequence[SpanRecord], limit: int) -> None:
    """Raise `Overloaded` when `records` hold more events without a span to join than
    `limit` (events for a conversation that holds spans are not orphans)."""
    if len(records) <= limit:
        return  # cannot exceed, whatever they are (the common case: no work)
    route = assembler.route
    is_open = assembler.is_open
    is_orphan = assembler.is_orphan
    orphans = 0
    for rec in records:
        if rec.kind is RecordKind.EVENT:
            key = route(rec)
            if not is_open(key) or is_orphan(key):
                orphans += 1
    if orphans > limit:
        raise Overloaded(
            f"request holds {orphans} GenAI log events whose spans have not arrived: more "
            f"than assembly.max_orphan_events={limit}; send them in smaller requests",
            retry_after_s=1.0,
        )
