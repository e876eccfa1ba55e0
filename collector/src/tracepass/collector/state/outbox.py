"""Results on their way to a shared results database (`state.results_url`).

With PostgreSQL as the results store, each result is still committed to the local
state file first, in the same group commit as its window-journal entry: an `outbox`
row (the stored result, its index values and violation rules, ready to insert) and a
bookkeeping row in the local `results` table (revision, close time, spans seen: what
the span buffer's recovery and retention read; no view). The forwarder
(`pipeline/forwarding.py`) moves outbox rows to the database in batches and deletes
them once the database committed them. A database that is down only makes the outbox
longer; `kill -9` loses nothing acknowledged (a batch sent but not yet deleted is sent
again, and the database keeps only the newest revision).
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

from tracepass.collector.state.reference_tools import ToolsRow
from tracepass.collector.state.writer import SqliteFile

__all__ = ["Outbox", "OutboxRow", "put_outbox"]


@dataclass(frozen=True, slots=True)
class OutboxRow:
    """One result on its way from the state file's outbox to the database."""

    seq: int
    key: str
    revision: int
    closed_at: float
    evaluated_at: float
    n_spans: int
    view: str
    indexed: tuple[Any, ...]  # INDEX_COLUMNS values, in order
    violations: tuple[tuple[str, str | None], ...]  # (rule, outcome)
    # The `reference_tools` row the view names (format 4), for the database to hold too.
    tools: ToolsRow | None = None


# The local bookkeeping row: no view, no index values (the database has them); an empty
# summary so a later schema upgrade's backfill leaves it alone.
_PUT_LOCAL = (
    "INSERT INTO results (conv_key, revision, closed_at, evaluated_at, n_spans, purged, view, "
    "summary) VALUES (?,?,?,?,?,0,'','') ON CONFLICT(conv_key) DO UPDATE SET "
    "revision=excluded.revision, closed_at=excluded.closed_at, "
    "evaluated_at=excluded.evaluated_at, n_spans=excluded.n_spans, purged=0 "
    "WHERE excluded.revision >= results.revision"
)
_ENCODE = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def put_outbox(
    conn: sqlite3.Connection,
    key: str,
    *,
    revision: int,
    closed_at: float,
    evaluated_at: float,
    n_spans: int,
    view: str,
    indexed: tuple[Any, ...],
    violations: list[tuple[str, str | None]],
    tools: str | None = None,
) -> None:
    """Queue one result for the database (inside the writer's transaction); `tools`:
    the digest of the `reference_tools` row its view names (the same transaction
    stores that row in the state file)."""
    conn.execute(_PUT_LOCAL, (key, revision, closed_at, evaluated_at, n_spans))
    conn.execute(
        "INSERT INTO outbox (conv_key, revision, closed_at, evaluated_at, n_spans, view, "
        "indexed, violations, tools) VALUES (?,?,?,?,?,?,?,?,?)",
        (
            key,
            revision,
            closed_at,
            evaluated_at,
            n_spans,
            view,
            _ENCODE(list(indexed)),
            _ENCODE([list(v) for v in violations]),
            tools,
        ),
    )


class Outbox:
    """The outbox of the state file `db` (reads on its read connection)."""

    def __init__(self, db: SqliteFile) -> None:
        self.db = db

    def count(self) -> int:
        return int(self.db.reader.execute("SELECT count(*) FROM outbox").fetchone()[0])

    def peek(self, limit: int) -> list[OutboxRow]:
        """The oldest `limit` rows, in commit order."""
        return [
            OutboxRow(
                seq=int(seq),
                key=key,
                revision=int(rev),
                closed_at=float(closed),
                evaluated_at=float(evaluated),
                n_spans=int(n),
                view=view,
                indexed=tuple(json.loads(indexed)),
                violations=tuple((str(r), o) for r, o in json.loads(violations)),
                tools=None if digest is None else ToolsRow(digest, tools),
            )
            for seq, key, rev, closed, evaluated, n, view, indexed, violations, digest, tools in (
                self.db.reader.execute(
                    "SELECT o.seq, o.conv_key, o.revision, o.closed_at, o.evaluated_at, "
                    "o.n_spans, o.view, o.indexed, o.violations, o.tools, t.tools "
                    "FROM outbox o LEFT JOIN reference_tools t ON t.digest = o.tools "
                    "ORDER BY o.seq LIMIT ?",
                    (limit,),
                )
            )
        ]

    async def remove(self, upto: int) -> int:
        """Delete the rows up to `upto` (the database has them)."""
        return await self.db.run(
            lambda conn: conn.execute("DELETE FROM outbox WHERE seq <= ?", (upto,)).rowcount
        )
