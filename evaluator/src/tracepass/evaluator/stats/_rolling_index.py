"""Which contribution each conversation made to the rolling windows, for the revision
horizon only.

A revision replaces a conversation's earlier outcome, so the windows must know, per
conversation, what it added (key, time, task, outcome, tag, revision, whether it fed
the CUSUM). Kept for every conversation of a 24 h window that index alone would grow
with traffic (13 million conversations a day at 150/s). It is kept only while a
revision can still come: `RollingConfig.revision_horizon_s` after the conversation's
last accepted evaluation (the collector derives it from how long it retains evaluated
conversations for late spans). Later, the contribution stays in the buckets and can no
longer be undone: a revision that late counts as a new conversation.

Layout, for memory: one row per accepted evaluation in flat columns, in time order
(≈ 39 bytes: a 96-bit hash of the conversation id in a `Q` and an `I` column, time,
revision (32-bit; the rare larger one in a side dict), stream number, task and tag
codes, outcome, CUSUM flag, liveness), and an open-addressing table (linear probing,
`array('i')`, ≈ 9–12 bytes per row) from the hash to the row. The id itself is not
kept: two ids share a row only if their 96-bit BLAKE2b digests collide (≈ 10^-17 for
a million ids). Rows older than the horizon are
dropped from the front; table slots pointing before the first row are tombstones,
cleared when the table is rebuilt (vectorized, when live and dead slots fill 70 % of
it). No object per row for the garbage collector.
"""

from __future__ import annotations

import hashlib
import sys
from array import array
from bisect import bisect_right
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["ConversationIndex", "IndexColumns", "conversation_hash"]

_EMPTY = -1
_MIN_TABLE = 1024
_EPOCH_LIMIT = 1 << 30  # table values are int32 offsets from the epoch: rebuild first
_COMPACT_AT = 1024
_SMALL_REV = 1 << 31  # revisions outside (-2^31, 2^31) live in `_big_revs`
_BIG = -(1 << 31)  # the `revs` value of such a row


def conversation_hash(conversation_id: str) -> tuple[int, int]:
    """The 96-bit key of a conversation id (stable across processes: persisted)."""
    d = hashlib.blake2b(conversation_id.encode("utf-8", "surrogatepass"), digest_size=12).digest()
    return int.from_bytes(d[:8], "little"), int.from_bytes(d[8:], "little")


@dataclass(frozen=True, slots=True)
class IndexColumns:
    """Live rows (copies), in time order: what the state persists and restores."""

    h1: array[int]
    h2: array[int]
    times: array[float]
    revs: array[int]
    streams: array[int]
    tasks: list[str]
    tags: list[str]
    ok: array[int]
    fed: bytearray


class ConversationIndex:
    """Rows by conversation hash (see the module docstring)."""

    __slots__ = (
        "_big_revs",
        "_codes",
        "_epoch",
        "_filled",
        "_size",
        "_table",
        "_values",
        "alive",
        "base",
        "fed",
        "h1",
        "h2",
        "horizon",
        "ok",
        "revs",
        "streams",
        "tags",
        "tasks",
        "times",
    )

    def __init__(self, horizon: float) -> None:
        self.horizon = horizon
        self.h1 = array("Q")
        self.h2 = array("I")
        self.times = array("d")
        self.revs = array("i")
        self._big_revs: dict[int, int] = {}  # absolute row -> revision, see `_BIG`
        self.streams = array("I")
        self.tasks = array("I")  # codes into `_values` (tasks and tags share it)
        self.tags = array("I")
        self.ok = array("b")
        self.fed = bytearray()
        self.alive = bytearray()  # 0 once a later revision superseded the row
        self.base = 0  # absolute number of the first row
        self._codes: dict[str, int] = {}
        self._values: list[str] = []
        self._epoch = 0  # table values are absolute row numbers minus this
        self._table = array("i", [_EMPTY]) * _MIN_TABLE
        self._size = _MIN_TABLE
        self._filled = 0  # slots not empty (live or tombstone)

    def __len__(self) -> int:
        """Rows held (live or superseded, not yet dropped)."""
        return len(self.times)

    def revision(self, row: int) -> int:
        """The revision of row offset `row`."""
        r = self.revs[row]
        return self._big_revs[self.base + row] if r == _BIG else r

    def nbytes(self) -> int:
        """Bytes of the columns and the table (`sys.getsizeof`: allocated, not used)."""
        cols = (self.h1, self.h2, self.times, self.revs, self.streams, self.tasks, self.tags)
        flat = (self.ok, self.fed, self.alive, self._table)
        return sum(sys.getsizeof(c) for c in (*cols, *flat)) + sys.getsizeof(self._big_revs)

    def value(self, code: int) -> str:
        return self._values[code]

    def _code(self, s: str) -> int:
        code = self._codes.get(s)
        if code is None:
            code = self._codes[s] = len(self._values)
            self._values.append(s)
        return code

    # ------------------------------------------------------------------ lookup

    def find(self, h1: int, h2: int, now: float) -> tuple[int, int]:
        """(row offset or -1, slot to write the conversation's new row to). A row older
        than the horizon is not found (its conversation is forgotten)."""
        table, size = self._table, self._size
        rel = self._epoch - self.base
        slot = h1 % size
        free = -1
        while True:
            v = table[slot]
            if v == _EMPTY:
                return -1, (slot if free < 0 else free)
            row = v + rel
            if row < 0:  # dropped row: tombstone
                if free < 0:
                    free = slot
            elif self.h1[row] == h1 and self.h2[row] == h2:
                if self.times[row] <= now - self.horizon:
                    return -1, slot
                return row, slot
            slot += 1
            if slot == size:
                slot = 0

    def put(
        self,
        slot: int,
        key: tuple[int, int],
        *,
        t: float,
        revision: int,
        stream: int,
        task: str,
        tag: str,
        ok: int,
        fed: int,
    ) -> None:
        """Append a row and point `slot` (from `find`, nothing changed since) at it."""
        self.h1.append(key[0])
        self.h2.append(key[1])
        self.times.append(t)
        if -_SMALL_REV < revision < _SMALL_REV:
            self.revs.append(revision)
        else:
            self._big_revs[self.base + len(self.revs)] = revision
            self.revs.append(_BIG)
        self.streams.append(stream)
        self.tasks.append(self._code(task))
        self.tags.append(self._code(tag))
        self.ok.append(ok)
        self.fed.append(fed)
        self.alive.append(1)
        if self._table[slot] == _EMPTY:
            self._filled += 1
        self._table[slot] = self.base + len(self.times) - 1 - self._epoch

    # ------------------------------------------------------------------ upkeep

    def expire(self, now: float) -> None:
        """Drop rows past the horizon (in batches: amortized O(1) per row), and rebuild
        the table when it fills or its offsets near the int32 limit. Call before `find`
        (never between `find` and `put`)."""
        size = len(self.times)
        drop = bisect_right(self.times, now - self.horizon) if size else 0
        if drop and (drop == size or (drop >= _COMPACT_AT and drop * 32 >= size)):
            for col in (self.h1, self.h2, self.times, self.revs, self.streams):
                del col[:drop]
            for col2 in (self.tasks, self.tags, self.ok):
                del col2[:drop]
            del self.fed[:drop]
            del self.alive[:drop]
            self.base += drop
            if self._big_revs:
                self._big_revs = {r: v for r, v in self._big_revs.items() if r >= self.base}
        end = self.base + len(self.times)
        if self._filled * 10 >= self._size * 7 or end - self._epoch >= _EPOCH_LIMIT:
            self._rebuild()

    def _live(self) -> npt.NDArray[np.intp]:
        return (
            np.flatnonzero(np.frombuffer(self.alive, dtype=np.uint8))
            if self.alive
            else (np.zeros(0, dtype=np.intp))
        )

    def _rebuild(self) -> None:
        """A new table over the live rows (vectorized linear probing: each round places
        one row per free home slot, the others move one slot on), and the string
        dictionary re-coded to the values still used."""
        live = self._live()
        size = max(_MIN_TABLE, live.size * 9 // 4)  # load <= 44 % after the rebuild
        table = np.full(size, _EMPTY, dtype=np.int32)
        keys = (
            np.frombuffer(self.h1, dtype=np.uint64)[live] if live.size else np.zeros(0, np.uint64)
        )
        slot = (keys % np.uint64(size)).astype(np.int64)
        pending = np.arange(live.size)
        while pending.size:
            s = slot[pending]
            free = table[s] == _EMPTY
            cand, cs = pending[free], s[free]
            homes, first = np.unique(cs, return_index=True)
            placed = cand[first]
            table[homes] = live[placed]  # offsets from the new epoch (= base)
            done = np.zeros(live.size, dtype=bool)
            done[placed] = True
            pending = pending[~done[pending]]
            slot[pending] = (slot[pending] + 1) % size
        self._table = array("i", table.tobytes())
        self._size = size
        self._epoch = self.base
        self._filled = int(live.size)
        self._recode(live)

    def _recode(self, live: npt.NDArray[np.intp]) -> None:
        if len(self._values) <= 2 * max(64, live.size):
            return
        codes = np.concatenate(
            [np.frombuffer(self.tasks, np.uint32), np.frombuffer(self.tags, np.uint32)]
        )
        used, inverse = np.unique(codes, return_inverse=True)
        self._values = [self._values[int(c)] for c in used]
        self._codes = {v: i for i, v in enumerate(self._values)}
        new = inverse.astype(np.uint32)
        n = len(self.tasks)
        self.tasks = array("I", new[:n].tobytes())
        self.tags = array("I", new[n:].tobytes())

    # ------------------------------------------------------------------ persistence

    def capture(self, now: float) -> IndexColumns:
        """The live rows within the horizon (copies)."""
        keep = (
            np.frombuffer(self.alive, dtype=np.uint8).astype(bool)
            if self.alive
            else (np.zeros(0, dtype=bool))
        )
        if len(self.times):
            keep &= np.frombuffer(self.times, dtype=np.float64) > now - self.horizon
        rows = np.flatnonzero(keep)
        values = np.array(self._values or [""], dtype=object)

        def col(a: array[int] | array[float] | bytearray, dtype: str) -> npt.NDArray[np.generic]:
            return np.frombuffer(a, dtype=dtype)[rows] if len(a) else np.zeros(0, dtype)

        return IndexColumns(
            h1=array("Q", col(self.h1, "=u8").tobytes()),
            h2=array("I", col(self.h2, "=u4").tobytes()),
            times=array("d", col(self.times, "=f8").tobytes()),
            revs=array("q", [self.revision(r) for r in rows.tolist()]),
            streams=array("I", col(self.streams, "=u4").tobytes()),
            tasks=values[col(self.tasks, "=u4")].tolist(),
            tags=values[col(self.tags, "=u4")].tolist(),
            ok=array("b", col(self.ok, "=i1").tobytes()),
            fed=bytearray(col(self.fed, "=u1").tobytes()),
        )

    def load(self, cols: IndexColumns) -> None:
        """Replace the rows with `cols` (time-sorted; a conversation hash appearing
        twice keeps its last row) and rebuild the table."""
        size = len(cols.times)
        self.h1, self.h2, self.times = cols.h1, cols.h2, cols.times
        self.streams, self.ok = cols.streams, cols.ok
        self.fed = cols.fed
        self.revs, self._big_revs = array("i"), {}
        for i, r in enumerate(cols.revs):
            if -_SMALL_REV < r < _SMALL_REV:
                self.revs.append(r)
            else:
                self._big_revs[i] = r
                self.revs.append(_BIG)
        self._codes, self._values = {}, []
        self.tasks = array("I", [self._code(t) for t in cols.tasks])
        self.tags = array("I", [self._code(t) for t in cols.tags])
        self.alive = bytearray(b"\x01") * size
        if size:
            pair = np.stack(
                [
                    np.frombuffer(cols.h1, np.uint64),
                    np.frombuffer(cols.h2, np.uint32).astype(np.uint64),
                ],
                axis=1,
            )
            _, last = np.unique(pair[::-1], axis=0, return_index=True)
            keep = np.zeros(size, dtype=np.uint8)
            keep[size - 1 - last] = 1
            self.alive = bytearray(keep.tobytes())
        self.base = 0
        self._rebuild()
