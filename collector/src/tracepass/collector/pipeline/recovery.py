"""Crash recovery: put the conversations found in the state file back into the assembler.

Open conversations resume where they were; evaluated ones still inside their retention
window are retained for late spans, and re-opened (next revision) when the file holds
more spans than their last evaluation saw.
"""

from __future__ import annotations

import logging

from tracepass.collector.assembly import Assembler
from tracepass.collector.state import StoredConversation

__all__ = ["restore_conversations"]

log = logging.getLogger(__name__)


def restore_conversations(
    assembler: Assembler,
    stored: list[StoredConversation],
    *,
    now: float,
    retention_s: float,
    source: object,
) -> tuple[int, int, int]:
    """Restore `stored` into `assembler`; returns (opened, re-opened, retained)."""
    reopened = retained = opened = 0
    # Retained conversations in the order they closed: retention expires them oldest
    # first (`assembly/retention.py`).
    for sc in sorted(stored, key=lambda sc: sc.closed_at or 0.0):
        if sc.closed_at is None or sc.revision is None:
            assembler.restore(sc.key, sc.records, last_seen=sc.last_seen)
            opened += 1
        elif sc.closed_at + retention_s > now:
            if len(sc.records) > (sc.evaluated_spans or 0):
                assembler.restore(
                    sc.key, sc.records, last_seen=sc.last_seen, revision=sc.revision + 1
                )
                reopened += 1
            else:
                assembler.restore(
                    sc.key,
                    sc.records,
                    last_seen=sc.last_seen,
                    revision=sc.revision,
                    closed_at=sc.closed_at,
                )
                retained += 1
    if opened or reopened or retained:
        log.info(
            "recovered state from %s: %d open, %d re-opened by late spans, %d retained",
            source,
            opened,
            reopened,
            retained,
        )
    return opened, reopened, retained
