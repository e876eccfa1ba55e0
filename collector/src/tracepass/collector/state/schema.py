"""The state file's tables, its schema version and the upgrades of older files."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable
from pathlib import Path

from tracepass.collector.state.failure_index import FAILURE_INDEX_SCHEMA
from tracepass.collector.state.index import FILTER_INDEXES, INDEX_COLUMNS, INDEX_SCHEMA, backfill
from tracepass.collector.state.reference_tools import REFERENCE_TOOLS_SCHEMA

__all__ = ["JOURNAL_RESULT", "JOURNAL_WINDOW", "SCHEMA_VERSION", "StateError", "open_database"]

log = logging.getLogger(__name__)

SCHEMA_VERSION = 6
PAGE_SIZE = 16384  # of new state files
# Upgraded in place: version 1 files lack the request log tables, which `_SCHEMA`
# creates; version 2 request logs lack the `signal` column (all their rows are traces);
# versions 1-3 lack the result index columns, added and filled by `_migrate_results`;
# versions 1-4 lack the window journal's `format` column (all their entries are whole
# results, JOURNAL_RESULT: they still replay); versions 1-5 lack the `reference_tools`
# table (created by `REFERENCE_TOOLS_SCHEMA`) and the outbox's `tools` column (NULL for
# the rows queued before: their views are format 3, self-contained).
_UPGRADABLE = {1, 2, 3, 4, 5}
# What a window-journal entry's text holds: the whole `ConversationResult` as JSON
# (schema versions 1-4), or the caller's compact window entry (since version 5: what
# the rolling windows read of a result, export/windows/window_entry.py).
JOURNAL_RESULT = 1
JOURNAL_WINDOW = 2
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS spans (
    trace_id TEXT NOT NULL,
    span_id TEXT NOT NULL,
    conv_key TEXT NOT NULL,
    received_at REAL NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (trace_id, span_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS spans_conv ON spans (conv_key);
CREATE TABLE IF NOT EXISTS results (
    conv_key TEXT PRIMARY KEY,
    revision INTEGER NOT NULL,
    closed_at REAL NOT NULL,
    evaluated_at REAL NOT NULL,
    n_spans INTEGER NOT NULL,
    purged INTEGER NOT NULL DEFAULT 0,
    view TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS results_closed ON results (purged, closed_at);
CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS requests (
    id INTEGER PRIMARY KEY,
    received_at REAL NOT NULL,
    data BLOB NOT NULL,
    routing TEXT NOT NULL,
    signal TEXT NOT NULL DEFAULT 'traces'
);
CREATE TABLE IF NOT EXISTS request_keys (
    conv_key TEXT NOT NULL,
    req_id INTEGER NOT NULL,
    PRIMARY KEY (conv_key, req_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS request_keys_req ON request_keys (req_id);
CREATE TABLE IF NOT EXISTS window_log (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    conv_key TEXT NOT NULL,
    revision INTEGER NOT NULL,
    evaluated_at REAL NOT NULL,
    result TEXT NOT NULL,
    format INTEGER NOT NULL DEFAULT 1
);
CREATE TABLE IF NOT EXISTS outbox (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    conv_key TEXT NOT NULL,
    revision INTEGER NOT NULL,
    closed_at REAL NOT NULL,
    evaluated_at REAL NOT NULL,
    n_spans INTEGER NOT NULL,
    view TEXT NOT NULL,
    indexed TEXT NOT NULL,
    violations TEXT NOT NULL,
    tools TEXT
);
CREATE TABLE IF NOT EXISTS merges (
    seq INTEGER PRIMARY KEY,
    old_key TEXT NOT NULL,
    new_key TEXT NOT NULL
);
"""


class StateError(RuntimeError):
    """The state file cannot be used (message names the file and the problem)."""


def open_database(connect: Callable[[], sqlite3.Connection], path: Path) -> None:
    """Create or upgrade the file at `path` (raises StateError for an unusable one)."""
    try:
        conn = connect()
        # New files only (SQLite ignores it once the file has pages): request blobs
        # are ~100 KB-1 MB, and 16 KiB pages write them with a quarter of the
        # overflow-page bookkeeping of the 4 KiB default (about half the CPU per
        # stored request, measured).
        conn.execute(f"PRAGMA page_size={PAGE_SIZE}")
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise StateError(f"{path}: cannot enable WAL journal mode (got {mode})")
        _refuse_newer(conn, path)  # before anything below changes the file
        conn.executescript(_SCHEMA)
        conn.executescript(FAILURE_INDEX_SCHEMA)
        conn.executescript(REFERENCE_TOOLS_SCHEMA)
        columns = {row[1] for row in conn.execute("PRAGMA table_info(outbox)")}
        if "tools" not in columns:
            conn.execute("ALTER TABLE outbox ADD COLUMN tools TEXT")
        columns = {row[1] for row in conn.execute("PRAGMA table_info(requests)")}
        if "signal" not in columns:
            conn.execute("ALTER TABLE requests ADD COLUMN signal TEXT NOT NULL DEFAULT 'traces'")
        columns = {row[1] for row in conn.execute("PRAGMA table_info(window_log)")}
        if "format" not in columns:
            conn.execute(
                "ALTER TABLE window_log ADD COLUMN format INTEGER NOT NULL DEFAULT "
                f"{JOURNAL_RESULT}"
            )
        row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        if row is not None:
            row = (_version(path, row[0]),)
        if row is None or int(row[0]) in _UPGRADABLE or _lacks_index_columns(conn):
            _migrate_results(conn, path)
        if row is None:
            conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        elif int(row[0]) in _UPGRADABLE:
            conn.execute(
                "UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION),)
            )
        elif int(row[0]) != SCHEMA_VERSION:
            raise StateError(
                f"{path}: state schema version {row[0]}, this tracepass reads "
                f"version {SCHEMA_VERSION}; move the file away to start fresh"
            )
        conn.executescript(FILTER_INDEXES)  # files of any version (index.py)
        conn.close()
    except sqlite3.DatabaseError as exc:
        raise StateError(f"{path}: not a usable SQLite state file: {exc}") from exc


def _refuse_newer(conn: sqlite3.Connection, path: Path) -> None:
    """StateError for a file written by a newer tracepass or with an unreadable version."""
    has_meta = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'"
    ).fetchone()
    if has_meta is None:
        return
    row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    if row is not None and _version(path, row[0]) > SCHEMA_VERSION:
        raise StateError(
            f"{path}: state schema version {row[0]}, this tracepass reads version "
            f"{SCHEMA_VERSION} (written by a newer tracepass); upgrade tracepass or move "
            "the file away to start fresh"
        )


def _version(path: Path, text: object) -> int:
    """`meta.schema_version` as a number, or StateError: a file whose version cannot be
    read is not guessed at (it would be "upgraded" or misread), it is refused."""
    try:
        version = int(str(text).strip())
    except ValueError:
        version = -1
    if version < 1:
        raise StateError(
            f"{path}: unreadable state schema version {str(text)[:64]!r} (expected a "
            f"number up to {SCHEMA_VERSION}); move the file away to start fresh"
        )
    return version


def _lacks_index_columns(conn: sqlite3.Connection) -> bool:
    """Whether `results` misses an index column added since its file was created (added
    by `_migrate_results`, NULL for the rows already stored)."""
    have = {r[1] for r in conn.execute("PRAGMA table_info(results)")}
    return any(name not in have for name, _ in INDEX_COLUMNS)


def _migrate_results(conn: sqlite3.Connection, path: Path) -> None:
    """Add the result index columns and indexes (new files and version 1/2 files
    alike) and fill them for rows already stored, in one transaction."""
    have = {r[1] for r in conn.execute("PRAGMA table_info(results)")}
    conn.execute("BEGIN IMMEDIATE")
    try:
        for name, decl in INDEX_COLUMNS:
            if name not in have:
                conn.execute(f"ALTER TABLE results ADD COLUMN {name} {decl}")
        for statement in INDEX_SCHEMA.split(";"):
            if statement.strip():
                conn.execute(statement)
        n = backfill(conn, path)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    if n:
        log.info("%s: indexed %d stored results (state schema upgrade)", path, n)
