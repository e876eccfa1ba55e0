"""The state file's writer: one thread owns the write connection, with group commit.

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
- Reads use a second connection (`reader`): WAL readers never block the writer.
- An exclusive lock on `<path>.lock` while open: two collectors writing one state file
  would interleave their windows and revisions.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import fcntl
import logging
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TypeAlias, TypeVar

from tracepass.collector.state.file_identity import FileIdentity
from tracepass.collector.state.schema import StateError, open_database
from tracepass.evaluator.ratelimited_log import RateLimitedLog

__all__ = ["Durability", "SqliteFile", "StateError"]

log = logging.getLogger(__name__)
_rate_limited = RateLimitedLog(log)  # a full disk fails every commit

T = TypeVar("T")
Durability = Literal["none", "batch"]

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


class SqliteFile:
    """The state file: `open()`, then `run`/`submit` writes and read through `reader`."""

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
        # CPU seconds the writer thread has used (waiting excluded): the part of
        # `batch` durability's cost that runs off the event loop (benchmark report).
        self.writer_cpu_s = 0.0
        self._lock_fd: int | None = None
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
        self.identity = FileIdentity(self.path)
        self._opened(self._reader)
        self._thread = threading.Thread(target=self._run, name="tracepass-state", daemon=True)
        self._thread.start()

    def _opened(self, reader: sqlite3.Connection) -> None:
        """Hook: the file is open and upgraded (before the writer starts)."""

    def _open_database(self) -> None:
        open_database(self._connect, self.path)

    def read_connection(self) -> sqlite3.Connection | None:
        """The read connection (None until open): the API installs its query time limit
        on it (`api/query_guard.py`)."""
        return self._reader

    @property
    def reader(self) -> sqlite3.Connection:
        """The read connection (WAL: never blocks the writer); `open()` first."""
        assert self._reader is not None, "open() first"
        return self._reader

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
    def is_open(self) -> bool:
        return self._thread is not None

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
