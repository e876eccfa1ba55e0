"""The read API's and the web UI's queries run off the event loop, one at a time per
worker, under a time limit.

Why: `outcome=fail` repeated 1,500 times plus `reference_set=nope` on 100k stored results
made one 7.5 KB GET take 73 s *on the event loop*, so `/healthz` (and every exporter)
waited up to 79 s. Parameters are now bounded and de-duplicated (`params.py`) and every
filter is indexed, but a query over a large state file can still be slow; so each runs
in a worker thread (`workers` of them; more waiting than `max_waiting`: 503 +
Retry-After) and SQLite interrupts it once it has run `time_limit_s` (504). The limit is
enforced by a progress handler on the store's read connection that only looks at
threads running a guarded query: the pipeline's own reads on that connection are never
interrupted.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

__all__ = ["QueryBusy", "QueryGuard", "QueryRefused", "QueryTimeout"]

T = TypeVar("T")
_PROGRESS_OPS = 10_000  # SQLite VM steps between deadline checks (~0.1-1 ms)


class QueryRefused(Exception):
    """A read the guard did not let finish; `status` is its HTTP answer."""

    status = 503
    retry_after_s: float | None = None


class QueryBusy(QueryRefused):
    status = 503
    retry_after_s = 1.0


class QueryTimeout(QueryRefused):
    status = 504


class QueryGuard:
    def __init__(
        self,
        connection: Callable[[], sqlite3.Connection | None],
        *,
        time_limit_s: float,
        workers: int = 2,
        max_waiting: int = 16,
    ) -> None:
        self.time_limit_s = time_limit_s
        self.max_waiting = max_waiting
        self._connection = connection
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="tracepass-api")
        self._deadlines: dict[int, float] = {}
        self._installed: sqlite3.Connection | None = None
        self._waiting = 0
        self.timeouts = 0
        self.busy = 0

    async def run(self, compute: Callable[[], T]) -> T:
        """`compute()` in a worker thread under the time limit."""
        if self._waiting >= self.max_waiting:
            self.busy += 1
            raise QueryBusy(f"too many queries running ({self.max_waiting}); retry shortly")
        self._waiting += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(
                self._executor, self._limited, compute
            )
        finally:
            self._waiting -= 1

    def _limited(self, compute: Callable[[], T]) -> T:
        self._install()
        ident = threading.get_ident()
        self._deadlines[ident] = time.monotonic() + self.time_limit_s
        try:
            return compute()
        except sqlite3.OperationalError as exc:
            if "interrupted" not in str(exc):
                raise
            self.timeouts += 1
            raise QueryTimeout(
                f"query exceeded the time limit of {self.time_limit_s:g} s "
                "(limits.query_timeout_s); narrow the filters or the time range"
            ) from None
        finally:
            self._deadlines.pop(ident, None)

    def _install(self) -> None:
        conn = self._connection()
        if conn is None or conn is self._installed:
            return
        deadlines = self._deadlines

        def over_time() -> int:
            deadline = deadlines.get(threading.get_ident())
            return 1 if deadline is not None and time.monotonic() > deadline else 0

        conn.set_progress_handler(over_time, _PROGRESS_OPS)
        self._installed = conn

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
