"""The review queue's rows in the state file: which conversations wait for a person, and
the labels people gave (docs/review.md "The live queue").

Two tables of their own, touched only through a `ReviewStore`: `ReviewLabels` here, or
`PostgresReviewLabels` (`pg_review.py`) with a shared results database, so every
replica sees every label:

    review_queue   conv_key, reason, queued_at             one row per queued conversation
    review_labels  conv_key, passed, turns, comment, reviewer, labelled_at

A label is a person's verdict on the conversation (`passed`, None: not given) and on
some of its turns (`turns`: turn index → pass), with a comment. Labelling a
conversation that was never queued queues it too (the API's "label any conversation").
Writes go through the store's writer thread (`StateStore.run`), reads through its reader
connection (`StateStore.read`).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

__all__ = [
    "LABEL_COLUMNS",
    "QueueItem",
    "ReadOnlyFile",
    "ReviewLabel",
    "ReviewLabels",
    "ReviewReads",
    "ReviewStore",
    "label_of_row",
    "label_row",
]

T = TypeVar("T")


class _Store(Protocol):
    """What the review tables need of a results store (`StateStore` has it)."""

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T: ...

    def read(self, fn: Callable[[sqlite3.Connection], T]) -> T: ...


class ReadOnlyFile:
    """A state file opened read-only (`tracepass review export --state`): reads only."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        raise PermissionError("the state file is open read-only")

    def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return fn(self.conn)


_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS review_queue ("
    " conv_key TEXT PRIMARY KEY, reason TEXT NOT NULL, queued_at REAL NOT NULL)",
    "CREATE TABLE IF NOT EXISTS review_labels ("
    " conv_key TEXT PRIMARY KEY, passed INTEGER, turns TEXT NOT NULL,"
    " comment TEXT NOT NULL, reviewer TEXT, labelled_at REAL NOT NULL)",
)


class ReviewStore(Protocol):
    """Where the queue and the labels live (the state file or the shared database)."""

    async def open(self) -> None: ...

    async def enqueue(self, conversation_id: str, reason: str, at: float) -> bool: ...

    async def put_label(self, label: ReviewLabel) -> None: ...

    def queue(self, *, pending_only: bool = True, limit: int = 100) -> list[QueueItem]: ...

    def counts(self) -> tuple[int, int]: ...

    def queued(self, conversation_id: str) -> QueueItem | None: ...

    def label(self, conversation_id: str) -> ReviewLabel | None: ...

    def labels(self) -> list[ReviewLabel]: ...


@dataclass(frozen=True, slots=True)
class QueueItem:
    conversation_id: str
    reason: str  # the rule that queued it (`failing`, …) or `manual`
    queued_at: float
    labelled: bool


@dataclass(frozen=True, slots=True)
class ReviewLabel:
    conversation_id: str
    passed: bool | None  # the conversation as a whole (None: no verdict given)
    turns: dict[int, bool] = field(default_factory=dict)  # turn index → pass
    comment: str = ""
    reviewer: str | None = None
    labelled_at: float = 0.0


def label_row(label: ReviewLabel) -> tuple[Any, ...]:
    """The `LABEL_COLUMNS` values of `label` (the inverse of `label_of_row`)."""
    turns = json.dumps({str(k): v for k, v in sorted(label.turns.items())})
    passed = None if label.passed is None else int(label.passed)
    return (label.conversation_id, passed, turns, label.comment, label.reviewer, label.labelled_at)


def label_of_row(row: Any) -> ReviewLabel:
    key, passed, turns, comment, reviewer, at = row
    return ReviewLabel(
        conversation_id=str(key),
        passed=None if passed is None else bool(passed),
        turns={int(k): bool(v) for k, v in json.loads(str(turns)).items()},
        comment=str(comment),
        reviewer=None if reviewer is None else str(reviewer),
        labelled_at=float(at),
    )


LABEL_COLUMNS = "conv_key, passed, turns, comment, reviewer, labelled_at"
_QUEUED = (
    "SELECT q.conv_key, q.reason, q.queued_at, l.conv_key IS NOT NULL "
    "FROM review_queue q LEFT JOIN review_labels l ON l.conv_key = q.conv_key "
)


class ReviewReads:
    """The queue's and the labels' reads, written once (`?` placeholders): a store runs
    them with `_rows` (`ReviewLabels` on the state file, `PostgresReviewLabels`)."""

    def _rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[Any]:
        raise NotImplementedError

    def queue(self, *, pending_only: bool = True, limit: int = 100) -> list[QueueItem]:
        """Queued conversations, oldest first; by default those not labelled yet."""
        where = "WHERE l.conv_key IS NULL " if pending_only else ""
        rows = self._rows(f"{_QUEUED}{where}ORDER BY q.queued_at, q.conv_key LIMIT ?", (limit,))
        return [QueueItem(str(k), str(r), float(t), bool(done)) for k, r, t, done in rows]

    def counts(self) -> tuple[int, int]:
        """(queued in all, labelled)."""
        (row,) = self._rows(
            "SELECT (SELECT count(*) FROM review_queue), (SELECT count(*) FROM review_labels)"
        )
        return int(row[0]), int(row[1])

    def queued(self, conversation_id: str) -> QueueItem | None:
        rows = self._rows(f"{_QUEUED}WHERE q.conv_key = ?", (conversation_id,))
        if not rows:
            return None
        row = rows[0]
        return QueueItem(str(row[0]), str(row[1]), float(row[2]), bool(row[3]))

    def label(self, conversation_id: str) -> ReviewLabel | None:
        rows = self._rows(
            f"SELECT {LABEL_COLUMNS} FROM review_labels WHERE conv_key = ?", (conversation_id,)
        )
        return label_of_row(rows[0]) if rows else None

    def labels(self) -> list[ReviewLabel]:
        """Every label, oldest first (people label hundreds, not millions)."""
        rows = self._rows(
            f"SELECT {LABEL_COLUMNS} FROM review_labels ORDER BY labelled_at, conv_key"
        )
        return [label_of_row(r) for r in rows]


class ReviewLabels(ReviewReads):
    """The queue and the labels of one state file (see the module docstring)."""

    def __init__(self, store: _Store) -> None:
        self.store = store

    def _rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[Any]:
        return self.store.read(lambda conn: conn.execute(sql, args).fetchall())

    async def open(self) -> None:
        """Create the tables (idempotent; older state files get them on first start)."""

        def op(conn: sqlite3.Connection) -> None:
            for statement in _SCHEMA:
                conn.execute(statement)

        await self.store.run(op)

    # ------------------------------------------------------------------ writes

    async def enqueue(self, conversation_id: str, reason: str, at: float) -> bool:
        """Queue a conversation; False when it already was (the first reason stays)."""

        def op(conn: sqlite3.Connection) -> bool:
            cur = conn.execute(
                "INSERT OR IGNORE INTO review_queue (conv_key, reason, queued_at) VALUES (?,?,?)",
                (conversation_id, reason, at),
            )
            return cur.rowcount > 0

        return await self.store.run(op)

    async def put_label(self, label: ReviewLabel) -> None:
        """Store a label (replacing an earlier one of the same conversation)."""
        row = label_row(label)

        def op(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT OR IGNORE INTO review_queue (conv_key, reason, queued_at) VALUES (?,?,?)",
                (label.conversation_id, "manual", label.labelled_at),
            )
            conn.execute(
                f"INSERT OR REPLACE INTO review_labels ({LABEL_COLUMNS}) VALUES (?,?,?,?,?,?)",
                row,
            )

        await self.store.run(op)

    # ------------------------------------------------------------------ reads
