"""Durable collector state in SQLite (WAL): spans, evaluation results, key-value blobs.

Why it is shaped like this:
- One writer thread owns the write connection; the event loop only enqueues work and
  awaits a future, so gRPC/HTTP keep answering while SQLite fsyncs.
- Group commit: in `batch` durability every ingest enqueues its spans and waits; the
  writer takes everything that arrives within `batch_max_delay_ms` of the first waiting
  request and commits it in one transaction, then releases all of them. A request is
  acknowledged to its client only after that commit, so an acknowledged span is in the
  WAL file and survives `kill -9` (synchronous=NORMAL: durable against process death;
  an OS crash / power loss may lose the last transactions, see docs/collector.md).
  The ops of a transaction run without a savepoint each unless one fails (`_apply`),
  and the event loop's waiters are woken once per commit (`_settle`): per op, both cost
  more than a stored result's inserts.
- The ingest path (`write_request`) stores each export request once, as the protobuf
  bytes the client sent, plus its signal (traces, or logs carrying GenAI events) and
  its routing (which conversation each held record went to): one row per request
  instead of a JSON-encoded row per span, which made `batch` durability cost more CPU
  than normalization. Recovery decodes and normalizes those requests again
  (`load(normalize, normalize_logs)`). `request_keys` says which conversations still
  need a request row, so purging a conversation deletes the rows no one needs.
- Records without a request (`write_spans`: `ingest_records`, the clean shutdown of
  `none` durability) are stored as compact JSON arrays (`codec.py`).
- Reads for the conversation API use a second connection: WAL readers never block the
  writer. The list API filters on columns copied out of each result when it is written
  (`index.py`), never by decoding stored results.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import fcntl
import json
import logging
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeAlias, TypeVar

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracepass.collector.normalize.records import SpanRecord
from tracepass.collector.state.codec import (
    StoredResult,
    decode_record,
    decode_result,
    encode_record,
    encode_request,
    encode_result,
    encode_routing,
)
from tracepass.collector.state.failure_index import (
    FAILURE_INDEX_SCHEMA,
    PRIOR,
    FailureModeIndex,
    stored_signatures,
)
from tracepass.collector.state.file_identity import FileIdentity
from tracepass.collector.state.index import (
    FILTER_INDEXES,
    INDEX_COLUMNS,
    INDEX_SCHEMA,
    ResultFilter,
    ResultRow,
    backfill,
    index_values,
    list_results,
    version_costs,
    write_violations,
)
from tracepass.evaluator.ratelimited_log import RateLimitedLog

log = logging.getLogger(__name__)
_rate_limited = RateLimitedLog(log)  # a full disk fails every commit

T = TypeVar("T")
Durability = Literal["none", "batch"]

SCHEMA_VERSION = 5
PAGE_SIZE = 16384  # of new state files
# Upgraded in place: version 1 files lack the request log tables, which `_SCHEMA`
# creates; version 2 request logs lack the `signal` column (all their rows are traces);
# versions 1-3 lack the result index columns, added and filled by `_migrate_results`;
# versions 1-4 lack the window journal's `format` column (all their entries are whole
# results, JOURNAL_RESULT: they still replay).
_UPGRADABLE = {1, 2, 3, 4}
# What a window-journal entry's text holds: the whole `ConversationResult` as JSON
# (schema versions 1-4), or the caller's compact window entry (since version 5: what
# the rolling windows read of a result, export/window_entry.py).
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
CREATE TABLE IF NOT EXISTS merges (
    seq INTEGER PRIMARY KEY,
    old_key TEXT NOT NULL,
    new_key TEXT NOT NULL
);
"""


_INDEXED = ", ".join(name for name, _ in INDEX_COLUMNS)
_PUT_RESULT = (
    f"INSERT INTO results (conv_key, revision, closed_at, evaluated_at, n_spans, purged, view, "
    f"{_INDEXED}) VALUES (?,?,?,?,?,0,?,{','.join('?' * len(INDEX_COLUMNS))}) "
    "ON CONFLICT(conv_key) DO UPDATE SET revision=excluded.revision, "
    "closed_at=excluded.closed_at, evaluated_at=excluded.evaluated_at, "
    "n_spans=excluded.n_spans, purged=0, view=excluded.view, "
    + ", ".join(f"{name}=excluded.{name}" for name, _ in INDEX_COLUMNS)
    + " WHERE excluded.revision >= results.revision"
)


class StateError(RuntimeError):
    """The state file cannot be used (message names the file and the problem)."""


def _apply_merges(conn: sqlite3.Connection, merges: Iterable[tuple[str, str]]) -> None:
    """A trace-only buffer joined its conversation: re-key what is stored under it."""
    for old, new in merges:
        conn.execute("UPDATE spans SET conv_key=? WHERE conv_key=?", (new, old))
        conn.execute(
            "INSERT OR IGNORE INTO request_keys SELECT ?, req_id FROM request_keys "
            "WHERE conv_key=?",
            (new, old),
        )
        conn.execute("DELETE FROM request_keys WHERE conv_key=?", (old,))
        conn.execute("INSERT INTO merges (old_key, new_key) VALUES (?,?)", (old, new))


# ------------------------------------------------------------------------ recovery

Normalize = Callable[[ExportTraceServiceRequest], tuple[list[SpanRecord], Any]]
NormalizeLogs = Callable[[ExportLogsServiceRequest], tuple[list[SpanRecord], Any]]


@dataclass(frozen=True, slots=True)
class StoredConversation:
    """What restart recovery needs about one conversation with spans on disk."""

    key: str
    records: list[SpanRecord]
    last_seen: float
    # Set when the conversation was evaluated: its revision, close time and how many
    # spans that evaluation saw (more on disk now = late spans awaiting re-evaluation).
    revision: int | None = None
    closed_at: float | None = None
    evaluated_spans: int | None = None


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


# ------------------------------------------------------------------------ store

# An op's waiter: a thread's concurrent future (`submit`) or an event loop's future
# (`run`), which the writer settles with one loop wake-up per commit (`_settle`).
_Waiter: TypeAlias = "concurrent.futures.Future[Any] | asyncio.Future[Any]"
_Op = tuple[Callable[[sqlite3.Connection], Any], _Waiter]


def _apply(conn: sqlite3.Connection, batch: list[_Op]) -> list[tuple[bool, Any]]:
    """Run the ops of one transaction: each op is all or nothing, and one bad op must not
    fail its neighbours. A savepoint per op gives both but costs more than a stored
    result's own inserts (SQLite first copies every page the op touches into a statement
    journal: 16 KiB each, about eight b-trees per result), and ops practically never
    fail. So they run plainly; only when one raises is the transaction rolled back and
    the batch run again with a savepoint per op (an op may therefore run twice: it must
    only touch the database)."""
    outcomes: list[tuple[bool, Any]] = []
    try:
        for fn, _ in batch:
            outcomes.append((True, fn(conn)))
        return outcomes
    except Exception:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        conn.execute("BEGIN IMMEDIATE")
    outcomes = []
    for fn, _ in batch:
        conn.execute("SAVEPOINT op")
        try:
            value = fn(conn)
        except Exception as exc:
            conn.execute("ROLLBACK TO op")
            conn.execute("RELEASE op")
            outcomes.append((False, exc))
        else:
            conn.execute("RELEASE op")
            outcomes.append((True, value))
    return outcomes


def _settle(outcomes: list[tuple[asyncio.Future[Any], bool, Any]]) -> None:
    """On the event loop: resolve the futures of one commit (a caller that stopped
    waiting has cancelled its future; its write is committed all the same)."""
    for fut, ok, value in outcomes:
        if not fut.done():
            if ok:
                fut.set_result(value)
            else:
                fut.set_exception(value)


_STOP = object()


def _lacks_index_columns(conn: sqlite3.Connection) -> bool:
    """Whether `results` misses an index column added since its file was created (added
    by `_migrate_results`, NULL for the rows already stored)."""
    have = {r[1] for r in conn.execute("PRAGMA table_info(results)")}
    return any(name not in have for name, _ in INDEX_COLUMNS)


class StateStore:
    def __init__(
        self,
        path: Path,
        *,
        durability: Durability = "batch",
        batch_max_delay_ms: float = 5.0,
        max_batch_ops: int = 1024,
    ) -> None:
        self.path = Path(path)
        self.durability = durability
        self.batch_max_delay_s = batch_max_delay_ms / 1000.0
        self.max_batch_ops = max_batch_ops
        self._queue: queue.SimpleQueue[_Op | object] = queue.SimpleQueue()
        self._pending = 0
        self._pending_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._reader: sqlite3.Connection | None = None
        self.commits = 0  # transactions committed (for the benchmark's report)
        self.journal_seq_at_open = 0
        # CPU seconds the writer thread has used (waiting excluded): the part of
        # `batch` durability's cost that runs off the event loop (benchmark report).
        self.writer_cpu_s = 0.0
        self._lock_fd: int | None = None
        # Failure signatures per failing result (`failure_index.py`); its bound
        # (`failure_modes.max_per_version`) may be set before `open()`.
        self.failure_modes = FailureModeIndex()
        self.identity: FileIdentity | None = None  # set by open(): see file_identity.py

    # ---------------------------------------------------------------- lifecycle

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA busy_timeout=5000")
        return conn

    def _lock(self) -> None:
        """Hold an exclusive lock on `<path>.lock` while open: two collectors writing one
        state file would interleave their windows and revisions, so the second refuses
        to start, naming the holder's pid."""
        lock_path = self.path.with_name(self.path.name + ".lock")
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise StateError(
                f"{self.path}: in use by another tracepass process (pid {holder}); "
                "each collector needs its own state file (--state)"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._lock_fd = fd

    def _unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing releases the flock
            self._lock_fd = None

    def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock()
        try:
            self._open_database()
        except BaseException:
            self._unlock()
            raise
        self._reader = self._connect()
        self.failure_modes.load(self._reader)
        self.identity = FileIdentity(self.path)
        # Journal entries written by earlier processes end here; later ones are this
        # process's own (`window_journal` callers replay only the former).
        row = self._reader.execute("SELECT max(seq) FROM window_log").fetchone()
        self.journal_seq_at_open = int(row[0] or 0)
        self._thread = threading.Thread(target=self._run, name="tracepass-state", daemon=True)
        self._thread.start()

    def _open_database(self) -> None:
        try:
            conn = self._connect()
            # New files only (SQLite ignores it once the file has pages): request blobs
            # are ~100 KB-1 MB, and 16 KiB pages write them with a quarter of the
            # overflow-page bookkeeping of the 4 KiB default (about half the CPU per
            # stored request, measured).
            conn.execute(f"PRAGMA page_size={PAGE_SIZE}")
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StateError(f"{self.path}: cannot enable WAL journal mode (got {mode})")
            conn.executescript(_SCHEMA)
            conn.executescript(FAILURE_INDEX_SCHEMA)
            columns = {row[1] for row in conn.execute("PRAGMA table_info(requests)")}
            if "signal" not in columns:
                conn.execute(
                    "ALTER TABLE requests ADD COLUMN signal TEXT NOT NULL DEFAULT 'traces'"
                )
            columns = {row[1] for row in conn.execute("PRAGMA table_info(window_log)")}
            if "format" not in columns:
                conn.execute(
                    "ALTER TABLE window_log ADD COLUMN format INTEGER NOT NULL DEFAULT "
                    f"{JOURNAL_RESULT}"
                )
            row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            if row is None or int(row[0]) in _UPGRADABLE or _lacks_index_columns(conn):
                self._migrate_results(conn)
            if row is None:
                conn.execute(
                    "INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
                )
            elif int(row[0]) in _UPGRADABLE:
                conn.execute(
                    "UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION),)
                )
            elif int(row[0]) != SCHEMA_VERSION:
                raise StateError(
                    f"{self.path}: state schema version {row[0]}, this tracepass reads "
                    f"version {SCHEMA_VERSION}; move the file away to start fresh"
                )
            conn.executescript(FILTER_INDEXES)  # files of any version (index.py)
            conn.close()
        except sqlite3.DatabaseError as exc:
            raise StateError(f"{self.path}: not a usable SQLite state file: {exc}") from exc

    def _migrate_results(self, conn: sqlite3.Connection) -> None:
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
            n = backfill(conn, self.path)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        if n:
            log.info("%s: indexed %d stored results (state schema upgrade)", self.path, n)

    def close(self) -> None:
        """Finish every queued write, then stop the writer (blocking)."""
        if self._thread is not None:
            self._queue.put(_STOP)
            self._thread.join()
            self._thread = None
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        self._unlock()

    @property
    def backlog(self) -> int:
        """Writes queued and not yet committed (the pipeline refuses work above a cap)."""
        return self._pending

    # ---------------------------------------------------------------- writer thread

    def _run(self) -> None:
        conn = self._connect()
        conn.execute("PRAGMA synchronous=NORMAL")
        stopping = False
        while not stopping:
            first = self._queue.get()
            if first is _STOP:
                break
            cpu = time.thread_time()
            batch: list[_Op] = [first]  # type: ignore[list-item]
            deadline = time.monotonic() + self.batch_max_delay_s
            while len(batch) < self.max_batch_ops:
                timeout = deadline - time.monotonic()
                try:
                    item = (
                        self._queue.get(timeout=timeout)
                        if timeout > 0
                        else self._queue.get_nowait()
                    )
                except queue.Empty:
                    break
                if item is _STOP:
                    stopping = True
                    break
                batch.append(item)  # type: ignore[arg-type]
            self._commit(conn, batch)
            self.writer_cpu_s += time.thread_time() - cpu
        conn.close()

    def _commit(self, conn: sqlite3.Connection, batch: list[_Op]) -> None:
        try:
            conn.execute("BEGIN IMMEDIATE")
            outcomes = _apply(conn, batch)
            conn.execute("COMMIT")
            self.commits += 1
        except sqlite3.Error as exc:
            _rate_limited.error("commit", "%s: state commit failed: %s", self.path, exc)
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            outcomes = [(False, StateError(f"{self.path}: commit failed: {exc}"))] * len(batch)
        with self._pending_lock:
            self._pending -= len(batch)
        # Waiters on event loops are woken once per loop and commit, not once each:
        # every thread-safe call writes the loop's wake-up pipe, which cost as much CPU
        # as the commit when a transaction carries dozens of stored results.
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], bool, Any]]] = {}
        for (_, fut), (ok, value) in zip(batch, outcomes, strict=True):
            if isinstance(fut, asyncio.Future):
                by_loop.setdefault(fut.get_loop(), []).append((fut, ok, value))
            elif fut.set_running_or_notify_cancel():
                if ok:
                    fut.set_result(value)
                else:
                    fut.set_exception(value)
        for loop, settled in by_loop.items():
            with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits
                loop.call_soon_threadsafe(_settle, settled)

    def submit(self, fn: Callable[[sqlite3.Connection], T]) -> concurrent.futures.Future[T]:
        """Run `fn(conn)` inside the next group transaction; resolves after COMMIT. `fn`
        is all or nothing, and may run twice (`_apply`): it must only touch `conn`."""
        fut: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._enqueue(fn, fut)
        return fut

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """`submit` for the event loop: resolves after COMMIT."""
        fut: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._enqueue(fn, fut)
        return await fut

    def _enqueue(self, fn: Callable[[sqlite3.Connection], Any], waiter: Any) -> None:
        if self._thread is None:
            raise StateError(f"{self.path}: state store is not open")
        with self._pending_lock:
            self._pending += 1
        self._queue.put((fn, waiter))

    # ---------------------------------------------------------------- spans

    async def write_spans(
        self,
        rows: Iterable[tuple[str, SpanRecord]],
        received_at: float,
        merges: Iterable[tuple[str, str]] = (),
    ) -> None:
        """Insert new records (dedupe by trace+span id) and re-key merged buffers."""
        rows = list(rows)
        merges = list(merges)

        def op(conn: sqlite3.Connection) -> None:
            _apply_merges(conn, merges)
            conn.executemany(
                "INSERT OR IGNORE INTO spans VALUES (?,?,?,?,?)",
                [(r.trace_id, r.span_id, key, received_at, encode_record(r)) for key, r in rows],
            )

        await self.run(op)

    async def write_request(
        self,
        request: ExportTraceServiceRequest | ExportLogsServiceRequest,
        keys: Sequence[str | None],
        received_at: float,
        merges: Iterable[tuple[str, str]] = (),
    ) -> None:
        """Store one export request as received plus its routing: `keys[i]` is the
        conversation holding the normalizer's i-th record (`AddOutcome.keys`), None for
        records assembly did not hold (dropped), which recovery skips."""
        merges = list(merges)
        signal = "logs" if isinstance(request, ExportLogsServiceRequest) else "traces"

        def op(conn: sqlite3.Connection) -> None:
            # Serialized here, on the writer thread: the event loop only waits.
            slots: dict[str, int] = {}
            index = [-1 if k is None else slots.setdefault(k, len(slots)) for k in keys]
            _apply_merges(conn, merges)
            routing = encode_routing([list(slots), index, merges])
            cur = conn.execute(
                "INSERT INTO requests (received_at, data, routing, signal) VALUES (?,?,?,?)",
                (received_at, encode_request(request), routing, signal),
            )
            req_id = cur.lastrowid
            conn.executemany(
                "INSERT OR IGNORE INTO request_keys VALUES (?,?)", [(k, req_id) for k in slots]
            )

        await self.run(op)

    def load(
        self, normalize: Normalize | None = None, normalize_logs: NormalizeLogs | None = None
    ) -> list[StoredConversation]:
        """Every conversation with spans on disk (blocking; call before serving).

        Stored records are read first, then the request log is replayed in arrival
        order with `normalize` / `normalize_logs` (the normalizers that produced the
        records from trace / logs requests): each record
        goes to the conversation it was routed to, renamed by later trace merges, and
        only while that conversation still needs the request (not purged). Without
        `normalize` the request log is not read."""
        assert self._reader is not None, "open() first"
        meta = {
            row[0]: (int(row[1]), float(row[2]), int(row[3]))
            for row in self._reader.execute(
                "SELECT conv_key, revision, closed_at, n_spans FROM results WHERE purged=0"
            )
        }
        groups: dict[str, dict[tuple[str, str], SpanRecord]] = {}
        last: dict[str, float] = {}
        bad = 0
        for conv_key, received_at, data in self._reader.execute(
            "SELECT conv_key, received_at, data FROM spans"
        ):
            try:
                rec = decode_record(data)
            except (ValueError, TypeError, IndexError) as exc:
                bad += 1
                _rate_limited.error(
                    "bad_row",
                    "%s: undecodable span row in %s skipped: %s",
                    self.path,
                    conv_key,
                    exc,
                )
                continue
            groups.setdefault(conv_key, {}).setdefault((rec.trace_id, rec.span_id), rec)
            last[conv_key] = max(last.get(conv_key, 0.0), float(received_at))
        if normalize is not None:
            bad += self._replay(normalize, normalize_logs, groups, last)
        if bad:
            log.error("%s: %d stored spans could not be decoded", self.path, bad)
        out: list[StoredConversation] = []
        for key in sorted(groups):
            records = list(groups[key].values())
            if not records:
                continue
            m = meta.get(key)
            out.append(
                StoredConversation(
                    key,
                    records,
                    last[key],
                    revision=m[0] if m else None,
                    closed_at=m[1] if m else None,
                    evaluated_spans=m[2] if m else None,
                )
            )
        return out

    def _replay(
        self,
        normalize: Normalize,
        normalize_logs: NormalizeLogs | None,
        groups: dict[str, dict[tuple[str, str], SpanRecord]],
        last: dict[str, float],
    ) -> int:
        assert self._reader is not None
        alias: dict[str, str] = {}
        for old, new in self._reader.execute("SELECT old_key, new_key FROM merges ORDER BY seq"):
            alias[old] = new

        def resolve(key: str) -> str:
            for _ in range(64):  # merge chains are short; a cycle must not hang recovery
                nxt = alias.get(key)
                if nxt is None or nxt == key:
                    break
                key = nxt
            return key

        live = set(self._reader.execute("SELECT conv_key, req_id FROM request_keys"))
        bad = 0
        index: Any = None
        for req_id, received_at, data, routing, signal in self._reader.execute(
            "SELECT id, received_at, data, routing, signal FROM requests ORDER BY id"
        ):
            try:
                keys, index, _ = json.loads(routing)
                if signal == "logs":
                    if normalize_logs is None:
                        raise ValueError("a logs request, and no logs normalizer to read it")
                    records, _rejected = normalize_logs(ExportLogsServiceRequest.FromString(data))
                elif signal == "traces":
                    records, _rejected = normalize(ExportTraceServiceRequest.FromString(data))
                else:
                    raise ValueError(f"unknown signal {signal!r}")
                if len(records) != len(index):
                    raise ValueError(
                        f"{len(records)} records normalized, {len(index)} routed "
                        "(normalizer changed since the request was stored?)"
                    )
            except Exception as exc:  # a bad row must not stop recovery of the others
                bad += len(index) if isinstance(index, list) else 1
                _rate_limited.error(
                    "bad_request", "%s: stored request %d skipped: %s", self.path, req_id, exc
                )
                continue
            current = [resolve(k) for k in keys]
            for rec, i in zip(records, index, strict=True):
                if i < 0:
                    continue
                key = current[i]
                if (key, req_id) not in live and (keys[i], req_id) not in live:
                    continue  # that conversation was purged; the row stays for others
                groups.setdefault(key, {}).setdefault((rec.trace_id, rec.span_id), rec)
                if received_at > last.get(key, 0.0):
                    last[key] = float(received_at)
        return bad

    def request_count(self) -> int:
        assert self._reader is not None, "open() first"
        return int(self._reader.execute("SELECT count(*) FROM requests").fetchone()[0])

    def span_count(self) -> int:
        assert self._reader is not None, "open() first"
        return int(self._reader.execute("SELECT count(*) FROM spans").fetchone()[0])

    def span_ids(self) -> set[tuple[str, str]]:
        assert self._reader is not None, "open() first"
        return {(t, s) for t, s in self._reader.execute("SELECT trace_id, span_id FROM spans")}

    async def purge(self, closed_before: float, keep: Collection[str] = ()) -> int:
        """Delete spans of conversations evaluated before `closed_before` (past retention),
        except `keep` (re-opened by late spans)."""
        keep_set = set(keep)

        def op(conn: sqlite3.Connection) -> int:
            keys = [
                k
                for (k,) in conn.execute(
                    "SELECT conv_key FROM results WHERE purged=0 AND closed_at < ?",
                    (closed_before,),
                )
                if k not in keep_set
            ]
            n = 0
            for k in keys:
                n += _delete_conversation(conn, k)
                conn.execute("UPDATE results SET purged=1 WHERE conv_key=?", (k,))
            return n

        return await self.run(op)

    async def discard(self, key: str) -> int:
        """Delete a conversation's stored spans without a result (sampled out at
        completion): it will not be evaluated, so nothing may restore it."""
        return await self.run(lambda conn: _delete_conversation(conn, key))

    async def purge_results(self, evaluated_before: float) -> int:
        """Delete stored evaluation results whose spans are already purged and which were
        evaluated before `evaluated_before`: without this the results table grows by
        every conversation ever seen."""

        def op(conn: sqlite3.Connection) -> int:
            # A journal no snapshot ever took up (no metrics attached) must not grow forever.
            conn.execute("DELETE FROM window_log WHERE evaluated_at < ?", (evaluated_before,))
            conn.execute(
                "DELETE FROM result_violations WHERE conv_key IN (SELECT conv_key FROM "
                "results WHERE purged=1 AND evaluated_at < ?)",
                (evaluated_before,),
            )
            gone[:] = self.failure_modes.delete(
                conn, "purged=1 AND evaluated_at < ?", (evaluated_before,)
            )
            return conn.execute(
                "DELETE FROM results WHERE purged=1 AND evaluated_at < ?", (evaluated_before,)
            ).rowcount

        gone: list[Any] = []  # failure-mode rows deleted, counted down once committed
        deleted = await self.run(op)
        self.failure_modes.applied((gone, []))
        return deleted

    # ---------------------------------------------------------------- results

    async def put_result(
        self,
        key: str,
        *,
        revision: int,
        closed_at: float,
        n_spans: int,
        stored: StoredResult,
        evaluated_at: float,
        journal: str | None = None,
    ) -> int:
        """Store the evaluation as data (`encode_result`), never as an API view, so the API's
        shape can change without touching the file format. In the same transaction, append
        `journal` (what the rolling windows take of the result: the caller's compact entry,
        JOURNAL_WINDOW) to the window journal (`window_log`): the rolling windows are
        snapshotted only every few seconds, and the journal is what puts the evaluations
        since the last snapshot back into them after a crash. Returns the journal sequence
        number (0: no `journal` given, nothing journalled)."""
        text = encode_result(stored)
        # Derived here, on the event loop's side: cheap (no I/O) and keeps the writer
        # thread's transactions short.
        indexed = index_values(stored)
        signatures = stored_signatures(stored)
        # The failure-mode rows the op replaced: counted once the commit succeeded (an
        # op may run twice, so it only records them).
        modes: list[Any] = [((), ())]

        def op(conn: sqlite3.Connection) -> int:
            # The result and its window-journal entry commit together or not at all: an
            # op is all or nothing (`_apply`).
            prior = conn.execute(PRIOR, (key,)).fetchone()
            changed = conn.execute(
                _PUT_RESULT, (key, revision, closed_at, evaluated_at, n_spans, text, *indexed)
            ).rowcount
            if changed:
                write_violations(conn, key, stored, closed_at)
                modes[0] = self.failure_modes.write(conn, key, stored, signatures, closed_at, prior)
            if journal is None:
                return 0
            cur = conn.execute(
                "INSERT INTO window_log (conv_key, revision, evaluated_at, result, format) "
                "VALUES (?,?,?,?,?)",
                (key, revision, evaluated_at, journal, JOURNAL_WINDOW),
            )
            return int(cur.lastrowid or 0)

        seq = await self.run(op)
        self.failure_modes.applied(modes[0], indexed[0], indexed[1], closed_at)
        return seq

    def get_result(self, key: str) -> StoredResult | None:
        """The latest stored evaluation of `key`, in either stored format."""
        assert self._reader is not None, "open() first"
        row = self._reader.execute("SELECT view FROM results WHERE conv_key=?", (key,)).fetchone()
        if row is None:
            return None
        return decode_result(row[0])

    # ---------------------------------------------------------------- window journal

    def window_journal(self, after: int, upto: int) -> list[JournalEntry]:
        """Journal entries with `after < seq <= upto`, in commit order (blocking)."""
        assert self._reader is not None, "open() first"
        return [
            JournalEntry(int(seq), key, int(rev), float(at), text, int(fmt))
            for seq, key, rev, at, text, fmt in self._reader.execute(
                "SELECT seq, conv_key, revision, evaluated_at, result, format FROM window_log "
                "WHERE seq > ? AND seq <= ? ORDER BY seq",
                (after, upto),
            )
        ]

    def read_connection(self) -> sqlite3.Connection | None:
        """The read connection (None until open): the API installs its query time limit
        on it (`api/query_guard.py`)."""
        return self._reader

    def list_results(
        self, where: ResultFilter, *, limit: int, cursor: tuple[float, str] | None = None
    ) -> tuple[list[ResultRow], tuple[float, str] | None]:
        """One page of stored results matching `where`, newest first (`index.py`)."""
        assert self._reader is not None, "open() first"
        return list_results(self._reader, where, limit=limit, cursor=cursor)

    def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run the read-only query `fn` on the reader connection (blocking): the seam
        for index modules' own queries (`failure_index.py`)."""
        assert self._reader is not None, "open() first"
        return fn(self._reader)

    def reference_counts(
        self,
        since: float,
        *,
        agent_name: str | None = None,
        agent_version: str | None = None,
        reference_set: str | None = None,
    ) -> dict[str, tuple[int, int]]:
        """reference id → (trials, passes) of results completed since `since` (None
        filters: any). Trials are what pass@k counts: pass, fail and incomplete results
        that matched a reference (error and unscored are no evidence either way)."""
        assert self._reader is not None, "open() first"
        sql = (
            "SELECT reference_id, count(*), sum(outcome='pass') FROM results "
            "WHERE closed_at >= ? AND reference_id IS NOT NULL "
            "AND outcome IN ('pass','fail','incomplete')"
        )
        args: list[Any] = [since]
        for column, value in (
            ("agent_name", agent_name),
            ("agent_version", agent_version),
            ("reference_set", reference_set),
        ):
            if value is not None:
                sql += f" AND {column}=?"
                args.append(value)
        rows = self._reader.execute(sql + " GROUP BY reference_id", args)
        return {str(ref): (int(n), int(c or 0)) for ref, n, c in rows}

    def version_costs(
        self, since: float, *, agent_name: str | None = None, reference_set: str | None = None
    ) -> dict[tuple[str | None, str | None], tuple[list[float | None], list[float | None]]]:
        """Costs and durations per (agent, version) since `since` (`index.version_costs`)."""
        assert self._reader is not None, "open() first"
        return version_costs(
            self._reader, since, agent_name=agent_name, reference_set=reference_set
        )

    def outcome_trend(
        self, since: float, buckets: int
    ) -> tuple[float, float, list[tuple[str | None, str | None, int, int, int]]]:
        """Trials and passes per agent version in `buckets` equal time slices spanning
        the results completed since `since` (first to last of them): returns (start,
        slice seconds, rows of (agent, version, slice index, trials, passes)). Trials
        count as in `reference_counts`."""
        assert self._reader is not None, "open() first"
        trial = (
            "closed_at >= ? AND reference_id IS NOT NULL "
            "AND outcome IN ('pass','fail','incomplete')"
        )
        lo, hi = self._reader.execute(
            f"SELECT min(closed_at), max(closed_at) FROM results WHERE {trial}", (since,)
        ).fetchone()
        if lo is None:
            return since, 0.0, []
        width = max((float(hi) - float(lo)) / buckets, 1e-3)
        rows = self._reader.execute(
            "SELECT agent_name, agent_version, "
            f"min(CAST((closed_at - ?) / ? AS INTEGER), {buckets - 1}) AS b, "
            f"count(*), sum(outcome='pass') FROM results WHERE {trial} "
            "GROUP BY agent_name, agent_version, b",
            (lo, width, since),
        )
        return float(lo), width, [(a, v, int(b), int(n), int(c or 0)) for a, v, b, n, c in rows]

    # ---------------------------------------------------------------- blobs

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

        return self.submit(op)

    def journal_upto(self, key: str) -> int:
        """The journal sequence number the snapshot `key` includes (0: none)."""
        blob = self.get_blob(key + _JOURNAL_SUFFIX)
        return int(blob.decode()) if blob else 0

    def get_blob(self, key: str) -> bytes | None:
        assert self._reader is not None, "open() first"
        row = self._reader.execute("SELECT value FROM kv WHERE key=?", (key,)).fetchone()
        return None if row is None else bytes(row[0])


def _delete_conversation(conn: sqlite3.Connection, key: str) -> int:
    """Delete one conversation's spans, its request links, merges into it, and the
    request rows no other conversation needs; returns the number of span rows deleted."""
    n = conn.execute("DELETE FROM spans WHERE conv_key=?", (key,)).rowcount
    req_ids = [
        r for (r,) in conn.execute("SELECT req_id FROM request_keys WHERE conv_key=?", (key,))
    ]
    conn.execute("DELETE FROM request_keys WHERE conv_key=?", (key,))
    conn.execute("DELETE FROM merges WHERE new_key=?", (key,))
    # A request row goes once no conversation needs it any more.
    conn.executemany(
        "DELETE FROM requests WHERE id=? AND NOT EXISTS (SELECT 1 FROM request_keys WHERE req_id=?)",
        [(r, r) for r in req_ids],
    )
    return n
