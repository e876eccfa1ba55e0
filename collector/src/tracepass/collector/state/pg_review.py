"""The review queue and labels in the PostgreSQL results store (`state.results_url`):
the state file's `review_labels.py` tables, kept in the shared database, so a label
recorded through one replica shows on every replica and the live agreement (Cohen's
kappa) pools every replica's labels.

Same tables and meaning as in the state file (`ReviewStore`); the statements are
PostgreSQL's. Writes are blocking round trips, run off the event loop
(`asyncio.to_thread`); a database that cannot be reached raises `ResultsUnavailable`
(a `LookupError`: the API answers 503, nothing is half-written).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import psycopg

from tracepass.collector.state.review_labels import (
    LABEL_COLUMNS,
    QueueItem,
    ReviewLabel,
    label_of_row,
)

__all__ = ["REVIEW_PG_SCHEMA", "PostgresReviewLabels"]

T = TypeVar("T")

REVIEW_PG_SCHEMA = """
CREATE TABLE IF NOT EXISTS review_queue (
    conv_key TEXT PRIMARY KEY,
    reason TEXT NOT NULL,
    queued_at DOUBLE PRECISION NOT NULL
);
CREATE TABLE IF NOT EXISTS review_labels (
    conv_key TEXT PRIMARY KEY,
    passed INTEGER,
    turns TEXT NOT NULL,
    comment TEXT NOT NULL,
    reviewer TEXT,
    labelled_at DOUBLE PRECISION NOT NULL
);
"""
_ENQUEUE = (
    "INSERT INTO review_queue (conv_key, reason, queued_at) VALUES (%s,%s,%s) "
    "ON CONFLICT DO NOTHING"
)
_QUEUED = (
    "SELECT q.conv_key, q.reason, q.queued_at, l.conv_key IS NOT NULL "
    "FROM review_queue q LEFT JOIN review_labels l ON l.conv_key = q.conv_key "
)


class _Pool(Protocol):
    """What this needs of `PostgresResults`."""

    def reading(self) -> Any: ...

    def writing(self) -> Any: ...


class PostgresReviewLabels:
    """`ReviewStore` over the shared database (see the module docstring)."""

    def __init__(self, pool: _Pool) -> None:
        self.pool = pool

    async def open(self) -> None:
        """Nothing to create here: the tables come with the results schema. Not
        waiting for the database either: a database that is down must not stop the
        collector from starting (its routes answer 503 until it is back)."""

    def _write(self, fn: Callable[[psycopg.Connection[Any]], T]) -> T:
        with self.pool.writing() as conn:
            return fn(conn)

    def _read(self, fn: Callable[[psycopg.Connection[Any]], T]) -> T:
        with self.pool.reading() as conn:
            return fn(conn)

    # ------------------------------------------------------------------ writes

    async def enqueue(self, conversation_id: str, reason: str, at: float) -> bool:
        """Queue a conversation; False when it already was (the first reason stays)."""
        return await asyncio.to_thread(
            self._write,
            lambda conn: conn.execute(_ENQUEUE, (conversation_id, reason, at)).rowcount > 0,
        )

    async def put_label(self, label: ReviewLabel) -> None:
        """Store a label (replacing an earlier one of the same conversation)."""
        turns = json.dumps({str(k): v for k, v in sorted(label.turns.items())})
        row = (
            label.conversation_id,
            None if label.passed is None else int(label.passed),
            turns,
            label.comment,
            label.reviewer,
            label.labelled_at,
        )

        def op(conn: psycopg.Connection[Any]) -> None:
            conn.execute(_ENQUEUE, (label.conversation_id, "manual", label.labelled_at))
            conn.execute(
                f"INSERT INTO review_labels ({LABEL_COLUMNS}) VALUES (%s,%s,%s,%s,%s,%s) "
                "ON CONFLICT (conv_key) DO UPDATE SET passed = excluded.passed, "
                "turns = excluded.turns, comment = excluded.comment, "
                "reviewer = excluded.reviewer, labelled_at = excluded.labelled_at",
                row,
            )

        await asyncio.to_thread(self._write, op)

    # ------------------------------------------------------------------ reads

    def queue(self, *, pending_only: bool = True, limit: int = 100) -> list[QueueItem]:
        """Queued conversations, oldest first; by default those not labelled yet."""
        where = "WHERE l.conv_key IS NULL " if pending_only else ""
        rows = self._read(
            lambda conn: conn.execute(
                f"{_QUEUED}{where}ORDER BY q.queued_at, q.conv_key LIMIT %s", (limit,)
            ).fetchall()
        )
        return [QueueItem(str(k), str(r), float(t), bool(done)) for k, r, t, done in rows]

    def counts(self) -> tuple[int, int]:
        """(queued in all, labelled)."""
        row = self._read(
            lambda conn: conn.execute(
                "SELECT (SELECT count(*) FROM review_queue), (SELECT count(*) FROM review_labels)"
            ).fetchone()
        )
        assert row is not None
        return int(row[0]), int(row[1])

    def queued(self, conversation_id: str) -> QueueItem | None:
        row = self._read(
            lambda conn: conn.execute(
                f"{_QUEUED}WHERE q.conv_key = %s", (conversation_id,)
            ).fetchone()
        )
        if row is None:
            return None
        return QueueItem(str(row[0]), str(row[1]), float(row[2]), bool(row[3]))

    def label(self, conversation_id: str) -> ReviewLabel | None:
        row = self._read(
            lambda conn: conn.execute(
                f"SELECT {LABEL_COLUMNS} FROM review_labels WHERE conv_key = %s",
                (conversation_id,),
            ).fetchone()
        )
        return None if row is None else label_of_row(row)

    def labels(self) -> list[ReviewLabel]:
        """Every label, oldest first (people label hundreds, not millions)."""
        rows = self._read(
            lambda conn: conn.execute(
                f"SELECT {LABEL_COLUMNS} FROM review_labels ORDER BY labelled_at, conv_key"
            ).fetchall()
        )
        return [label_of_row(r) for r in rows]
