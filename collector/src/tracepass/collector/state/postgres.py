"""The results store in PostgreSQL (`state.results_url`): one database, many replicas.

Several collectors behind the conversation-routing gateway each evaluate their share of
the conversations; with this store they all write their results to one database and
every replica's API and UI read every result back from it.

- Writes arrive in batches from the state file's outbox (`outbox.py`), never straight
  from an evaluation: the local write is what survives `kill -9`, and a database that
  is down only makes the outbox longer. A batch is one transaction; a result is kept
  only if its revision is not older than the stored one (the same rule as SQLite), so
  resending a batch after a crash changes nothing.
- The schema is the SQLite store's: the same `results` columns (`index.INDEX_COLUMNS`,
  spelled once) and the same `result_violations` table and indexes, created on first
  use under an advisory lock (replicas start together); `tracepass_meta` holds the
  schema version. A database written by a newer tracepass is refused, an older one
  upgraded (columns added).
- Reads run the same list query as SQLite (`index.list_results`) on a pooled
  connection; `ResultsUnavailable` (a `LookupError`: the API answers 503 naming the
  database) when the database cannot be reached within `read_timeout_s`.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from tracepass.collector.state.aggregates import AgentCountRow, agent_counts, reference_counts
from tracepass.collector.state.codec import StoredResult, decode_result
from tracepass.collector.state.index import (
    FILTER_INDEXES,
    INDEX_COLUMNS,
    INDEX_SCHEMA,
    ResultFilter,
    ResultRow,
    list_results,
    version_costs,
)
from tracepass.collector.state.outbox import OutboxRow
from tracepass.collector.state.pg_candidates import (
    CANDIDATES_PG_SCHEMA,
    PostgresCandidateDecisions,
)
from tracepass.collector.state.pg_failure_modes import (
    FAILURE_MODES_PG_SCHEMA,
    ModeEntry,
    PostgresFailureModes,
)
from tracepass.collector.state.pg_review import REVIEW_PG_SCHEMA, PostgresReviewLabels
from tracepass.collector.state.pg_session import Deadlines, clean_text, nul_safe
from tracepass.collector.state.reference_tools import REFERENCE_TOOLS_SCHEMA, ToolsLookup
from tracepass.collector.state.results import UNREFERENCED_SQL, TrendRow, decode_unreferenced
from tracepass.collector.state.schema import StateError

__all__ = [
    "PG_SCHEMA_VERSION",
    "PostgresResults",
    "ResultsUnavailable",
    "SchemaRefused",
    "clean_text",
    "redact_url",
]

log = logging.getLogger(__name__)
# The pool logs every failed reconnection at WARNING (several a second while the
# database is down); the forwarder reports an outage itself, rate-limited.
logging.getLogger("psycopg.pool").setLevel(logging.ERROR)

# 1: results and violations; 2: the failure-mode index and the review queue
# (`pg_failure_modes.py`, `pg_review.py`; an upgrade fills the index from the results'
# summaries); 3: `reference_tools`, each reference's expected tools once (result row
# format 4, `reference_tools.py`; created empty on upgrade: format-3 rows carry theirs).
PG_SCHEMA_VERSION = 3
# Any constant: serializes schema creation/upgrade between replicas starting together.
_SCHEMA_LOCK = 0x7472_6163_6570  # "tracep"

_COLUMNS = ", ".join(f"{name} {decl}" for name, decl in INDEX_COLUMNS)
_SCHEMA = (
    f"""
CREATE TABLE IF NOT EXISTS tracepass_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS results (
    conv_key TEXT PRIMARY KEY,
    revision INTEGER NOT NULL,
    closed_at DOUBLE PRECISION NOT NULL,
    evaluated_at DOUBLE PRECISION NOT NULL,
    n_spans INTEGER NOT NULL,
    view TEXT NOT NULL,
    {_COLUMNS}
);
CREATE INDEX IF NOT EXISTS results_evaluated ON results (evaluated_at);
"""
    + (INDEX_SCHEMA + FILTER_INDEXES)
    .replace(" REAL ", " DOUBLE PRECISION ")
    .replace(" WITHOUT ROWID", "")
    + FAILURE_MODES_PG_SCHEMA
    + REVIEW_PG_SCHEMA
    + REFERENCE_TOOLS_SCHEMA
    + CANDIDATES_PG_SCHEMA
)

_INDEXED = [name for name, _ in INDEX_COLUMNS]
_ROW_COLUMNS = ["conv_key", "revision", "closed_at", "evaluated_at", "n_spans", "view", *_INDEXED]
_UPSERT_HEAD = f"INSERT INTO results ({', '.join(_ROW_COLUMNS)}) VALUES "
_UPSERT_TAIL = (
    " ON CONFLICT (conv_key) DO UPDATE SET "
    + ", ".join(f"{c}=excluded.{c}" for c in _ROW_COLUMNS[1:])
    + " WHERE excluded.revision >= results.revision RETURNING conv_key"
)
# A write (a batch: several statements, each under the server's 30 s statement_timeout)
# the database has not answered in this long is cut on the client side and retried.
_WRITE_DEADLINE_S = 60.0
_TRIAL = "closed_at >= %s AND reference_id IS NOT NULL AND outcome IN ('pass','fail','incomplete')"
_PASSES = "sum(CASE WHEN outcome = 'pass' THEN 1 ELSE 0 END)"


class ResultsUnavailable(LookupError):
    """The results database cannot be reached (the API answers 503 with this text)."""


class SchemaRefused(StateError, LookupError):
    """The database's schema is one this tracepass cannot use (newer, or its
    `schema_version` unreadable): `tracepass serve` exits 2 with this text at start-up;
    found later (the database was down at start-up), reads answer 503 with it."""


def redact_url(url: str) -> str:
    """`url` without its password (for logs, errors and /readyz)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host += f":{parts.port}"
    user = f"{parts.username}:***@" if parts.username else ""
    return urlunsplit(parts._replace(netloc=user + host))


class _QmarkConnection:
    """The list query (`index.list_results`) is written once with SQLite's `?`
    placeholders and its join-order hint; this runs it on PostgreSQL (`%s`, a plain
    JOIN: the planner orders joins itself). Its SQL holds no other `?` or `%`."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn

    def execute(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        sql = sql.replace("?", "%s").replace(" CROSS JOIN ", " JOIN ")
        return self.conn.execute(sql, args).fetchall()


class PostgresResults:
    """`ResultsStore` over PostgreSQL, plus `write_batch` and `purge_results`."""

    def __init__(
        self,
        url: str,
        *,
        max_connections: int = 4,
        read_timeout_s: float = 2.0,
        write_timeout_s: float = 10.0,
    ) -> None:
        self.url = url
        self.label = redact_url(url)
        self.read_timeout_s = read_timeout_s
        self.write_timeout_s = write_timeout_s
        self.max_connections = max_connections
        self._pool: ConnectionPool | None = None
        self._schema_ready = False
        self._schema_lock = threading.Lock()
        # The failure-mode index and the review queue, in the same database.
        self.failure_modes = PostgresFailureModes(self)
        self.review = PostgresReviewLabels(self)
        # Which reference candidates people approved or rejected (`pg_candidates.py`; a
        # table added without a schema version: older tracepass ignores it).
        self.candidate_decisions = PostgresCandidateDecisions(self)
        # Format-4 rows' expected tools, read once per digest (`reference_tools.py`).
        self._tools = ToolsLookup(self._fetch_tools)
        # The client-side deadline of every checkout and query (`pg_session.py`).
        self.deadlines = Deadlines()

    # ---------------------------------------------------------------- lifecycle

    def open(self) -> None:
        """Start the pool (connections are made in the background: a database that is
        down now does not stop the collector; its results wait in the outbox)."""
        if self._pool is not None:
            return
        self._pool = ConnectionPool(
            self.url,
            min_size=1,
            max_size=self.max_connections,
            open=False,
            timeout=self.write_timeout_s,
            kwargs={
                "connect_timeout": max(1, int(self.write_timeout_s)),
                # Writes use explicit transactions; a read then leaves nothing to roll
                # back when its connection goes back to the pool (no round trip there,
                # outside the deadline).
                "autocommit": True,
                # What bounds a query here (the API's progress-handler time limit is
                # SQLite's): the server cancels anything slower.
                "options": "-c statement_timeout=30000",
            },
            # A connection the database dropped (it restarted) is replaced before use
            # instead of failing one request: one round trip per checkout, under the
            # caller's deadline.
            check=self._check,
            # No U+0000 in any text parameter (`pg_session.py`).
            configure=nul_safe,
            name="tracepass-results",
        )
        self._pool.open(wait=False)

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    def _check(self, conn: psycopg.Connection[Any]) -> None:
        self.deadlines.attach(conn)
        ConnectionPool.check_connection(conn)

    def ensure_schema(self, timeout: float | None = None) -> None:
        """Create or upgrade the tables once per process (blocking; raises
        `ResultsUnavailable` when unreachable within `timeout` (default
        `write_timeout_s`), `SchemaRefused` for a newer or unreadable schema)."""
        if self._schema_ready:
            return
        wait = self.write_timeout_s if timeout is None else timeout
        with self._schema_lock, self._connection(wait, self.write_timeout_s) as conn:
            if self._schema_ready:
                return
            upgraded = None
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                have = {
                    r[0]
                    for r in conn.execute(
                        "SELECT column_name FROM information_schema.columns "
                        "WHERE table_name = 'results' AND table_schema = current_schema()"
                    )
                }
                for name, decl in INDEX_COLUMNS:
                    if name not in have:  # a column added since the database was made
                        conn.execute(f"ALTER TABLE results ADD COLUMN {name} {decl}")
                row = conn.execute(
                    "SELECT value FROM tracepass_meta WHERE key = 'schema_version'"
                ).fetchone()
                version = None if row is None else self._version(row[0])
                if version is None:
                    conn.execute(
                        "INSERT INTO tracepass_meta VALUES ('schema_version', %s)",
                        (str(PG_SCHEMA_VERSION),),
                    )
                elif version > PG_SCHEMA_VERSION:
                    raise SchemaRefused(
                        f"{self.label}: results schema version {version}, this tracepass "
                        f"reads version {PG_SCHEMA_VERSION}; upgrade tracepass"
                    )
                elif version < PG_SCHEMA_VERSION:
                    if version < 2:
                        upgraded = self._index_failure_modes(conn)
                    conn.execute(
                        "UPDATE tracepass_meta SET value = %s WHERE key = 'schema_version'",
                        (str(PG_SCHEMA_VERSION),),
                    )
            if upgraded is not None:
                self.failure_modes.committed(upgraded)
            self._schema_ready = True

    def _version(self, text: object) -> int:
        """`tracepass_meta.schema_version` as a number (`SchemaRefused` otherwise: a
        database this tracepass did not write, or damaged; never guessed at)."""
        try:
            version = int(str(text).strip())
        except ValueError:
            version = -1
        if version < 1:
            raise SchemaRefused(
                f"{self.label}: unreadable results schema version {str(text)[:64]!r} in "
                "tracepass_meta (expected a number up to "
                f"{PG_SCHEMA_VERSION}); point state.results_url at a tracepass database"
            )
        return version

    def _index_failure_modes(self, conn: psycopg.Connection[Any]) -> Any:
        """Upgrade from version 1: fill the failure-mode index from the stored results'
        index values (their summaries list their signatures; nothing is decoded)."""
        columns = ", ".join(_INDEXED)
        entries = [
            ModeEntry.of(str(key), float(closed_at), indexed)
            for key, closed_at, *indexed in conn.execute(
                f"SELECT conv_key, closed_at, {columns} FROM results"
            )
        ]
        return self.failure_modes.write(conn, (), entries)

    @contextmanager
    def _connection(
        self, timeout: float, deadline_s: float | None = None
    ) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection within `timeout` s, cut (`ResultsUnavailable`) when the
        checkout and the work together take over `deadline_s` (default `timeout`;
        an enclosing deadline of this thread stands instead)."""
        pool = self._pool
        if pool is None:
            raise ResultsUnavailable(f"results database {self.label}: not connected (closed)")
        limit = timeout if deadline_s is None else deadline_s
        with self.deadlines.within(limit) as armed:
            try:
                with pool.connection(timeout=timeout) as conn:
                    self.deadlines.attach(conn)
                    yield conn
            except (PoolTimeout, psycopg.OperationalError) as exc:
                if armed.fired:
                    raise ResultsUnavailable(
                        f"results database {self.label} did not answer in time "
                        f"(client-side deadline): {exc}"
                    ) from exc
                raise ResultsUnavailable(
                    f"results database {self.label} unreachable: {exc}"
                ) from exc

    @contextmanager
    def reading(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection for a read: the schema check, the checkout and the
        queries answer or raise `ResultsUnavailable` within `read_timeout_s`."""
        with self.deadlines.within(self.read_timeout_s):
            self.ensure_schema(self.read_timeout_s)
            with self._connection(self.read_timeout_s) as conn:
                yield conn

    @contextmanager
    def writing(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection in a transaction, for a write."""
        self.ensure_schema()
        with (
            self._connection(self.write_timeout_s, _WRITE_DEADLINE_S) as conn,
            conn.transaction(),
        ):
            yield conn

    # ---------------------------------------------------------------- writes

    def write_batch(self, rows: Sequence[OutboxRow]) -> int:
        """Store `rows` in one transaction; returns how many changed a stored row."""
        self.ensure_schema()
        newest: dict[str, OutboxRow] = {}
        for row in rows:  # one statement may touch a key once: keep its newest revision
            key = clean_text(row.key)  # the key as stored (`pg_session.py`)
            kept = newest.get(key)
            if kept is None or row.revision >= kept.revision:
                newest[key] = row
        batch = list(newest.values())
        if not batch:
            return 0
        width = len(_ROW_COLUMNS)
        values = ",".join(["(" + ",".join(["%s"] * width) + ")"] * len(batch))
        args: list[Any] = []
        for r in batch:
            args.extend((r.key, r.revision, r.closed_at, r.evaluated_at, r.n_spans, r.view))
            args.extend(r.indexed)
        tools = {r.tools.digest: r.tools.tools for r in batch if r.tools is not None}
        with (
            self._connection(self.write_timeout_s, _WRITE_DEADLINE_S) as conn,
            conn.transaction(),
        ):
            if tools:  # what the batch's format-4 rows name, before them
                with conn.cursor() as cur:
                    cur.executemany(
                        "INSERT INTO reference_tools (digest, tools) VALUES (%s,%s) "
                        "ON CONFLICT DO NOTHING",
                        list(tools.items()),
                    )
            changed = [k for (k,) in conn.execute(_UPSERT_HEAD + values + _UPSERT_TAIL, args)]
            keep = set(changed)
            keep_rows = [r for k, r in newest.items() if k in keep]
            noted = self.failure_modes.write(
                conn,
                changed,
                [ModeEntry.of(r.key, r.closed_at, r.indexed) for r in keep_rows],
            )
            if changed:
                conn.execute("DELETE FROM result_violations WHERE conv_key = ANY(%s)", (changed,))
                violations = [
                    (rule, r.key, r.closed_at, outcome)
                    for r in keep_rows
                    for rule, outcome in r.violations
                ]
                if violations:
                    with conn.cursor() as cur:
                        cur.executemany(
                            "INSERT INTO result_violations VALUES (%s,%s,%s,%s) "
                            "ON CONFLICT DO NOTHING",
                            violations,
                        )
        self.failure_modes.committed(noted)
        return len(changed)

    def purge_results(self, evaluated_before: float) -> int:
        """Delete results evaluated before `evaluated_before` (retention)."""
        self.ensure_schema()
        with (
            self._connection(self.write_timeout_s, _WRITE_DEADLINE_S) as conn,
            conn.transaction(),
        ):
            conn.execute(
                "DELETE FROM result_violations WHERE conv_key IN "
                "(SELECT conv_key FROM results WHERE evaluated_at < %s)",
                (evaluated_before,),
            )
            self.failure_modes.purge(conn, evaluated_before)
            cur = conn.execute("DELETE FROM results WHERE evaluated_at < %s", (evaluated_before,))
            return cur.rowcount

    # ---------------------------------------------------------------- ResultsStore

    def read_connection(self) -> None:
        """No SQLite connection to guard: `statement_timeout` bounds queries here."""
        return None

    def get_result(self, key: str) -> StoredResult | None:
        with self.reading() as conn:
            row = conn.execute("SELECT view FROM results WHERE conv_key = %s", (key,)).fetchone()
        return None if row is None else decode_result(row[0], self._tools)

    @property
    def shared(self) -> bool:
        return True

    def unreferenced_results(self, limit: int) -> list[StoredResult]:
        with self.reading() as conn:
            rows = conn.execute(UNREFERENCED_SQL.replace("?", "%s"), (limit,)).fetchall()
        return decode_unreferenced(rows, self._tools)

    def _fetch_tools(self, digest: str) -> str | None:
        """A `reference_tools` row's list (JSON text), or None."""
        with self.reading() as conn:
            row = conn.execute(
                "SELECT tools FROM reference_tools WHERE digest = %s", (digest,)
            ).fetchone()
        return None if row is None else str(row[0])

    def list_results(
        self, where: ResultFilter, *, limit: int, cursor: tuple[float, str] | None = None
    ) -> tuple[list[ResultRow], tuple[float, str] | None]:
        with self.reading() as conn:
            return list_results(_QmarkConnection(conn), where, limit=limit, cursor=cursor)  # type: ignore[arg-type]

    def reference_counts(
        self,
        since: float,
        *,
        agent_name: str | None = None,
        agent_version: str | None = None,
        reference_set: str | None = None,
    ) -> dict[str, tuple[int, int]]:
        with self.reading() as conn:
            return reference_counts(
                _QmarkConnection(conn),
                since,
                agent_name=agent_name,
                agent_version=agent_version,
                reference_set=reference_set,
            )

    def version_costs(
        self, since: float, *, agent_name: str | None = None, reference_set: str | None = None
    ) -> dict[tuple[str | None, str | None], tuple[list[float | None], list[float | None]]]:
        with self.reading() as conn:
            return version_costs(
                _QmarkConnection(conn),  # type: ignore[arg-type]
                since,
                agent_name=agent_name,
                reference_set=reference_set,
            )

    def outcome_trend(self, since: float, buckets: int) -> tuple[float, float, list[TrendRow]]:
        with self.reading() as conn:
            bounds = conn.execute(
                f"SELECT min(closed_at), max(closed_at) FROM results WHERE {_TRIAL}", (since,)
            ).fetchone()
            if bounds is None or bounds[0] is None:
                return since, 0.0, []
            lo, hi = float(bounds[0]), float(bounds[1])
            width = max((hi - lo) / buckets, 1e-3)
            rows = conn.execute(
                "SELECT agent_name, agent_version, "
                f"LEAST(floor((closed_at - %s) / %s)::int, {buckets - 1}) AS b, "
                f"count(*), {_PASSES} FROM results WHERE {_TRIAL} "
                "GROUP BY agent_name, agent_version, b",
                (lo, width, since),
            ).fetchall()
        return lo, width, [(a, v, int(b), int(n), int(c or 0)) for a, v, b, n, c in rows]

    def agent_counts(self, since: float) -> list[AgentCountRow]:
        with self.reading() as conn:
            return agent_counts(_QmarkConnection(conn), since)


def violations_json(violations: Sequence[tuple[str, str | None]]) -> str:
    return json.dumps([list(v) for v in violations], separators=(",", ":"))
