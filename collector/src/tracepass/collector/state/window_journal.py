"""The rolling windows' durable part in the state file: their snapshot (a blob) and the
journal of evaluations since it (`window_log`, written with each result).

The windows are snapshotted only every few seconds; the journal is what puts the
evaluations since the last snapshot back into them after a crash. A snapshot records
the journal position it includes, and the entries up to it are deleted with it, in the
same transaction. The component that restores, replays and persists the windows is
`export/windows/window_persistence.py`.
"""

from __future__ import annotations

import concurrent.futures
import sqlite3
from dataclasses import dataclass

from tracepass.collector.state.schema import JOURNAL_RESULT, JOURNAL_WINDOW
from tracepass.collector.state.writer import SqliteFile

__all__ = ["JOURNAL_RESULT", "JOURNAL_WINDOW", "JournalEntry", "WindowJournal", "append_entry"]


@dataclass(frozen=True, slots=True)
class JournalEntry:
    """One evaluation as the rolling windows received it: `text` is what `format`
    says (JOURNAL_WINDOW: the window entry `put_result` was given; JOURNAL_RESULT, in
    files written before schema version 5: the `ConversationResult` as JSON),
    `evaluated_at` the `now` it was recorded at."""

    seq: int
    key: str
    revision: int
    evaluated_at: float
    text: str
    format: int = JOURNAL_WINDOW


_JOURNAL_SUFFIX = ":journal_upto"


def append_entry(
    conn: sqlite3.Connection, key: str, revision: int, evaluated_at: float, text: str
) -> int:
    """Journal one evaluation's window entry (JOURNAL_WINDOW) inside the caller's
    transaction (the result's own write); returns its sequence number."""
    cur = conn.execute(
        "INSERT INTO window_log (conv_key, revision, evaluated_at, result, format) "
        "VALUES (?,?,?,?,?)",
        (key, revision, evaluated_at, text, JOURNAL_WINDOW),
    )
    return int(cur.lastrowid or 0)


class WindowJournal:
    """Snapshots and the window journal of the state file `db`."""

    def __init__(self, db: SqliteFile) -> None:
        self.db = db
        # Journal entries written by earlier processes end here; later ones are this
        # process's own (`window_journal` callers replay only the former).
        self.seq_at_open = 0

    def opened(self, reader: sqlite3.Connection) -> None:
        row = reader.execute("SELECT max(seq) FROM window_log").fetchone()
        self.seq_at_open = int(row[0] or 0)

    def window_journal(self, after: int, upto: int) -> list[JournalEntry]:
        """Journal entries with `after < seq <= upto`, in commit order (blocking)."""
        return [
            JournalEntry(int(seq), key, int(rev), float(at), text, int(fmt))
            for seq, key, rev, at, text, fmt in self.db.reader.execute(
                "SELECT seq, conv_key, revision, evaluated_at, result, format FROM window_log "
                "WHERE seq > ? AND seq <= ? ORDER BY seq",
                (after, upto),
            )
        ]

    def put_blob(
        self, key: str, value: bytes, *, journal_upto: int | None = None
    ) -> concurrent.futures.Future[None]:
        """Store a snapshot (e.g. the rolling aggregator's state); await or ignore. With
        `journal_upto`, the snapshot includes every window-journal entry up to that
        sequence number: it is recorded with the snapshot, and those entries are
        deleted, in the same transaction."""

        def op(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO kv VALUES (?,?) ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                (key, value),
            )
            if journal_upto is not None:
                conn.execute(
                    "INSERT INTO kv VALUES (?,?) ON CONFLICT(key) DO UPDATE "
                    "SET value=excluded.value",
                    (key + _JOURNAL_SUFFIX, str(journal_upto).encode()),
                )
                conn.execute("DELETE FROM window_log WHERE seq <= ?", (journal_upto,))

        return self.db.submit(op)

    def journal_upto(self, key: str) -> int:
        """The journal sequence number the snapshot `key` includes (0: none)."""
        blob = self.get_blob(key + _JOURNAL_SUFFIX)
        return int(blob.decode()) if blob else 0

    def get_blob(self, key: str) -> bytes | None:
        row = self.db.reader.execute("SELECT value FROM kv WHERE key=?", (key,)).fetchone()
        return None if row is None else bytes(row[0])
