"""Evaluated conversations kept for late spans, and tombstones after that, compactly.

Why: after evaluation a conversation is kept for `assembly.retention_s` (1 h by
default) so a late span can re-evaluate it (revision + 1); after that a tombstone
remains for `tombstone_ttl_s` so spans arriving even later are dropped and counted
instead of opening a bogus fragment. At a steady 150 conversations/s that is half a
million conversations: kept as objects (records, dicts, a dataclass each) they grew RSS
by ≈ 890 bytes per span and every full garbage collection scanned them.

So nothing here is a Python object per conversation. Each entry is a row of columns
(`array`s, a `bytearray`, lists of untracked strings/tuples) in arrival order, which is
also expiry order, plus one `dict` key -> row number holding only strings and ints (a
dict the GC does not track). Rows are freed from the front as they expire; a
conversation taken back out of the middle (a late span) leaves an empty row behind.

Where a retained conversation's records are:
- `batch` durability (`keep_records=False`): not in memory at all. The state file's
  span buffer holds the requests they came in until the same `retention_s` has passed
  (`SpanBuffer.purge`); a late span reads them back from there (`SpanBuffer.read_back`,
  as restart recovery does), so a retained conversation costs ≈ 300 bytes plus its
  trace links (`links.py`) whatever its size.
- `none` durability (`keep_records=True`, nothing on disk to read back): packed
  (`packed.py`: one untracked bytes object per conversation, ≈ 225 bytes per span).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from dataclasses import dataclass

from tracepass.collector.records import SpanRecord

from .links import CompactTrace
from .packed import pack_records, unpack_records

__all__ = ["Retained", "RetentionStore"]

# Rows freed from the front are dropped from the columns once they are this many and
# at least half of them (amortized O(1) per row).
_COMPACT_AT = 1024


@dataclass(frozen=True, slots=True)
class Retained:
    """One retained conversation taken out of the store."""

    key: str
    closed_at: float
    revision: int
    spans: int
    truncated: bool
    unjoined: int  # GenAI log events whose span it does not hold (counted when dropped)
    traces: tuple[CompactTrace, ...]
    records: list[SpanRecord] | None  # None: on disk (read back by the ingest stage)


class _Rows:
    """Row bookkeeping shared by the retained rows and the tombstones."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}  # key -> absolute row number
        self.keys: list[str | None] = []  # None: a row taken out
        self.traces: list[tuple[CompactTrace, ...]] = []
        self.base = 0  # absolute number of `keys[0]`
        self.head = 0  # first row that may be live

    def __len__(self) -> int:
        return len(self.index)

    def __contains__(self, key: object) -> bool:
        return key in self.index

    def row(self, key: str) -> int | None:
        n = self.index.get(key)
        return None if n is None else n - self.base

    def append(self, key: str, traces: tuple[CompactTrace, ...]) -> None:
        self.index[key] = self.base + len(self.keys)
        self.keys.append(key)
        self.traces.append(traces)

    def clear_row(self, i: int) -> None:
        key = self.keys[i]
        if key is not None:
            del self.index[key]
            self.keys[i] = None
            self.traces[i] = ()

    def front(self) -> int | None:
        """The oldest live row, or None."""
        keys = self.keys
        while self.head < len(keys) and keys[self.head] is None:
            self.head += 1
        self._compact()
        return self.head if self.head < len(keys) else None

    def live(self) -> Iterator[int]:
        """Live rows, oldest first (do not take rows out while iterating)."""
        keys = self.keys
        for i in range(self.head, len(keys)):
            if keys[i] is not None:
                yield i

    def _compact(self) -> None:
        head = self.head
        if head >= _COMPACT_AT and head * 2 >= len(self.keys):
            for column in self._columns():
                del column[:head]
            self.base += head
            self.head = 0

    def _columns(self) -> list[list[str | None] | list[tuple[CompactTrace, ...]] | array[float]]:
        return [self.keys, self.traces]


class _Tombstones(_Rows):
    def __init__(self) -> None:
        super().__init__()
        self.until = array("d")

    def _columns(self) -> list[list[str | None] | list[tuple[CompactTrace, ...]] | array[float]]:
        return [self.keys, self.traces, self.until]


class RetentionStore(_Rows):
    """The retained conversations (rows) and the tombstones (`tombs`)."""

    def __init__(self, *, keep_records: bool, max_tombstones: int) -> None:
        super().__init__()
        self.keep_records = keep_records
        self.max_tombstones = max_tombstones
        self.closed = array("d")
        self.revision = array("q")
        self.spans_of = array("q")
        self.unjoined = array("q")
        self.truncated = bytearray()
        self.packed: list[bytes | None] = []  # keep_records only
        self.tombs = _Tombstones()
        self.spans = 0  # spans of the retained conversations
        self.packed_spans = 0  # of those, held in memory (packed)

    def _columns(self) -> list[list[str | None] | list[tuple[CompactTrace, ...]] | array[float]]:
        columns: list[object] = [
            self.keys,
            self.traces,
            self.closed,
            self.revision,
            self.spans_of,
            self.unjoined,
            self.truncated,
        ]
        if self.keep_records:
            columns.append(self.packed)
        return columns  # type: ignore[return-value]  # each supports `del [:n]`

    # ------------------------------------------------------------------ retained

    def on_disk(self, key: str) -> bool:
        """Whether `key` is retained with its records on disk only (to read back)."""
        return not self.keep_records and key in self.index

    def retain(
        self,
        key: str,
        *,
        closed_at: float,
        revision: int,
        records: list[SpanRecord],
        truncated: bool,
        unjoined: int,
        traces: tuple[CompactTrace, ...],
    ) -> None:
        self.append(key, traces)
        self.closed.append(closed_at)
        self.revision.append(revision)
        self.spans_of.append(len(records))
        self.unjoined.append(unjoined)
        self.truncated.append(truncated)
        self.spans += len(records)
        if self.keep_records:
            self.packed.append(pack_records(records) if records else None)
            self.packed_spans += len(records)

    def peek(self, key: str) -> Retained | None:
        """A retained conversation with its records when held in memory (a late span or
        a retry looks into it); it stays retained until `take`."""
        i = self.row(key)
        return None if i is None else self._entry(i, records=True)

    def take(self, key: str) -> Retained | None:
        """Take a retained conversation out (re-opened by a late span)."""
        i = self.row(key)
        if i is None:
            return None
        out = self._entry(i, records=False)
        self._drop(i)
        return out

    def revision_of(self, key: str) -> int | None:
        i = self.row(key)
        return None if i is None else self.revision[i]

    def expired(self, closed_before: float) -> Iterator[Retained]:
        """Take out, oldest first, the conversations closed at or before `closed_before`."""
        while (i := self.front()) is not None and self.closed[i] <= closed_before:
            out = self._entry(i, records=False)
            self._drop(i)
            yield out

    def oldest(self, exclude: set[str]) -> str | None:
        """The oldest retained conversation not in `exclude` (memory cap)."""
        self.front()  # past the rows already taken out (repeated calls stay linear)
        return next(
            (key for i in self.live() if (key := self.keys[i]) is not None and key not in exclude),
            None,
        )

    def retained_keys(self) -> list[str]:
        return [key for i in self.live() if (key := self.keys[i]) is not None]

    def _entry(self, i: int, *, records: bool) -> Retained:
        key = self.keys[i]
        assert key is not None
        recs: list[SpanRecord] | None = None
        if self.keep_records:
            packed = self.packed[i]
            recs = [] if not records or packed is None else unpack_records(packed)
        return Retained(
            key,
            self.closed[i],
            self.revision[i],
            self.spans_of[i],
            bool(self.truncated[i]),
            self.unjoined[i],
            self.traces[i],
            recs,
        )

    def _drop(self, i: int) -> None:
        n = self.spans_of[i]
        self.spans -= n
        self.spans_of[i] = 0
        if self.keep_records:
            self.packed_spans -= n
            self.packed[i] = None
        self.clear_row(i)

    # ------------------------------------------------------------------ tombstones

    def is_tomb(self, key: str) -> bool:
        return key in self.tombs.index

    def bury(
        self, key: str, until: float, traces: tuple[CompactTrace, ...]
    ) -> list[tuple[str, tuple[CompactTrace, ...]]]:
        """Leave a tombstone for `key`; returns the oldest ones forgotten to keep
        `max_tombstones` (their trace links are the caller's to drop)."""
        tombs = self.tombs
        tombs.append(key, traces)
        tombs.until.append(until)
        forgotten = []
        while len(tombs) > self.max_tombstones and (i := tombs.front()) is not None:
            forgotten.append(self._unbury(i))
        return forgotten

    def expired_tombs(self, now: float) -> list[tuple[str, tuple[CompactTrace, ...]]]:
        tombs = self.tombs
        out = []
        while (i := tombs.front()) is not None and tombs.until[i] <= now:
            out.append(self._unbury(i))
        return out

    def _unbury(self, i: int) -> tuple[str, tuple[CompactTrace, ...]]:
        tombs = self.tombs
        key = tombs.keys[i]
        assert key is not None
        traces = tombs.traces[i]
        tombs.clear_row(i)
        return key, traces
