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
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import psycopg

from tracepass.collector.state.review_labels import (
    LABEL_COLUMNS,
    ReviewLabel,
    ReviewReads,
    label_row,
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


class _Pool(Protocol):
    """What this needs of `PostgresResults`."""

    def reading(self) -> Any: ...

    def writing(self) -> Any: ...


class PostgresReviewLabels(ReviewReads):
    """`ReviewStore` over the shared database (see the module docstring): the reads
    are the state file's (`ReviewReads`), the writes PostgreSQL's upserts."""

    def __init__(self, pool: _Pool) -> None:
        self.pool = pool

    async def open(self) -> None:
        """Nothing to create here: the tables come with the results schema. Not
        waiting for the database either: a database that is down must not stop the
        collector from starting (its routes answer 503 until it is back)."""

    def _write(self, fn: Callable[[psycopg.Connection[Any]], T]) -> T:
        with self.pool.writing() as conn:
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
        row = label_row(label)

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

    def _rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[Any]:
        """The shared reads (`ReviewReads`, written with `?`) on the database."""
        with self.pool.reading() as conn:
            rows: list[Any] = conn.execute(sql.replace("?", "%s"), args).fetchall()
        return rows
