"""What assembly hands out: completion reasons, completed conversations, and what one
`Assembler.add` did with a batch (the shapes the pipeline and the span buffer read)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tracepass.collector.records import SpanRecord

__all__ = [
    "END_TURNS_ATTRIBUTE",
    "AddOutcome",
    "Clock",
    "Completed",
    "Reason",
    "SpanKey",
    "TurnTarget",
]

Clock = Callable[[], float]
SpanKey = tuple[str, str]
# (reference_id, first user query) -> number of turns the matched reference has.
TurnTarget = Callable[[str | None, str | None], int | None]

END_TURNS_ATTRIBUTE = "tracepass.conversation.turns"


class Reason:
    """Completion reasons (label values of `tracepass_conversations_completed`)."""

    END_SIGNAL = "end_signal"
    REFERENCE_TURNS = "reference_turns"
    IDLE = "idle"
    TRACE_GRACE = "trace_grace"
    EVICTED = "evicted"
    LATE_SPANS = "late_spans"  # a re-evaluation (revision > 0); counted in `revisions`
    SHUTDOWN = "shutdown"  # offline / flush-all: end of input
    NO_SPAN = "no_span"  # only GenAI log events, their spans never came: dropped, not closed


@dataclass(frozen=True, slots=True)
class Completed:
    """A conversation handed over for evaluation."""

    key: str
    records: tuple[SpanRecord, ...]
    reason: str
    revision: int
    complete: bool
    last_seen: float
    closed_at: float


@dataclass(frozen=True, slots=True)
class AddOutcome:
    """What `Assembler.add` did with one batch.

    Stored as the batch plus one routing key per record (None: not held) instead of
    lists of `(key, record)` pairs: building two tuples and two list entries per span
    cost more than everything else `add` does for it. `accepted`/`held` build those
    lists on demand."""

    records: list[SpanRecord]  # the batch, in order
    keys: list[str | None]  # per record: the conversation holding it, None if dropped
    duplicates: int
    late: int
    dropped: int
    merged: list[tuple[str, str]]  # (trace-only key, conversation key) buffers merged
    duplicate_at: tuple[int, ...] = ()  # positions of records that were duplicates

    @property
    def held(self) -> list[tuple[str, SpanRecord]]:
        """New records + duplicates of records already held, with their keys: what a
        durable store must contain before the request is acknowledged (a retry after a
        failed commit is a duplicate)."""
        return [(k, r) for k, r in zip(self.keys, self.records, strict=True) if k is not None]

    @property
    def accepted(self) -> list[tuple[str, SpanRecord]]:
        """New records with the key they were routed to."""
        dup = set(self.duplicate_at)
        return [
            (k, r)
            for i, (k, r) in enumerate(zip(self.keys, self.records, strict=True))
            if k is not None and i not in dup
        ]

    @property
    def any_held(self) -> bool:
        # Only dropped records have no key (duplicates keep theirs).
        return len(self.keys) > self.dropped
