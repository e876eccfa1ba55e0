"""`ResultsForwarder`: moves results from the state file's outbox to a shared database.

A chain link right after the results writer (`results.py`): the writer commits each
result to the local outbox (`state/outbox.py`, with its window-journal entry), and this
component's background task sends the outbox to PostgreSQL in batches (a worker
thread: the event loop never waits on the network) and deletes what the database
committed. `on_result` only wakes it, so a result usually reaches the database within
milliseconds.

When the database is unreachable the batch stays in the outbox and is retried with
backoff (0.5 s doubling to 5 s); `readiness()` says why for `/readyz`, and
`tracepass_results_backlog` counts the results waiting. Retention of the shared
results (`state.results_retention_s`) runs here too, every `purge_interval_s`.

A batch the database REFUSES (a data or constraint error, not an outage) is sent again
one row at a time: the rows it takes are stored, and a row it refuses on its own is
set aside (deleted from the outbox, counted in `tracepass_results_refused{reason}`,
logged with its conversation key, rate-limited), so one poisoned row never blocks the
rows after it (issue 33: one NUL used to stop a replica's results for good).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable

import psycopg
from opentelemetry.metrics import CallbackOptions, Meter, Observation

from tracepass.collector.pipeline.components import ResultComponent
from tracepass.collector.pipeline.scheduling import ResultInfo
from tracepass.collector.state import Outbox, OutboxRow, StateError, StateStore
from tracepass.collector.state.postgres import PostgresResults, ResultsUnavailable
from tracepass.evaluator.models import ConversationResult
from tracepass.evaluator.ratelimited_log import RateLimitedLog

__all__ = ["BACKLOG_METRIC", "REFUSED_METRIC", "ResultsForwarder"]

log = logging.getLogger(__name__)

BACKLOG_METRIC = "tracepass_results_backlog"
REFUSED_METRIC = "tracepass_results_refused"
_MAX_BACKOFF_S = 5.0
# What the database says about a row's data (the row is set aside); anything else (an
# outage, a missing table, a full disk) keeps the outbox waiting, as before.
_ROW_ERRORS = (psycopg.DataError, psycopg.IntegrityError)


class ResultsForwarder(ResultComponent):
    name = "results forwarder"

    def __init__(
        self,
        store: StateStore,
        results: PostgresResults,
        *,
        meter: Meter | None = None,
        batch_size: int = 500,
        retention_cutoff: Callable[[], float | None] | None = None,
        purge_interval_s: float = 60.0,
        idle_poll_s: float = 1.0,
    ) -> None:
        self.store = store
        self.results = results
        self.outbox = Outbox(store)
        self.batch_size = batch_size
        self.retention_cutoff = retention_cutoff
        self.purge_interval_s = purge_interval_s
        self.idle_poll_s = idle_poll_s
        self.backlog = 0  # results in the outbox (as of the last look)
        self.forwarded = 0  # results the database committed (this process)
        self.refused = 0  # results the database refused on their own, set aside
        self.error: str | None = None  # why the last attempt failed (None: it worked)
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._log = RateLimitedLog(log)
        # From now on the state file queues results for the database (`state/outbox.py`).
        store.results.forward = True
        self._refused_counter = (
            None
            if meter is None
            else meter.create_counter(
                REFUSED_METRIC,
                description="Evaluation results the results database refused on their own "
                "(set aside from the outbox so later results still go), by reason",
            )
        )
        if meter is not None:
            meter.create_observable_gauge(
                BACKLOG_METRIC,
                callbacks=[self._observe],
                description="Evaluation results waiting in the state file's outbox for "
                "the results database (state.results_url)",
            )

    def _observe(self, _: CallbackOptions) -> Iterable[Observation]:
        yield Observation(self.backlog)

    async def start(self) -> None:
        await asyncio.to_thread(self.results.open)
        # A database whose schema this tracepass cannot use is refused now (`SchemaRefused`,
        # a StateError: exit 2); one that cannot be reached yet is checked on first use.
        with contextlib.suppress(ResultsUnavailable):
            await asyncio.to_thread(self.results.ensure_schema, self.results.read_timeout_s)
        self.backlog = self.outbox.count()
        self._task = asyncio.create_task(self._run(), name="tracepass-results-forwarder")

    async def shutdown(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
            # One last attempt: what it cannot send stays in the outbox for next time.
            with contextlib.suppress(ResultsUnavailable, StateError, OSError):
                while self.store.is_open and await self.forward_once():
                    pass
        await asyncio.to_thread(self.results.close)

    def on_result(self, result: ConversationResult, info: ResultInfo) -> None:
        self.backlog += 1
        self._wake.set()

    def readiness(self) -> str | None:
        """Why results are not reaching the database (None: they are)."""
        if self.error is None:
            return None
        return f"{self.error}; {self.backlog} results waiting in the state file's outbox"

    async def forward_once(self) -> bool:
        """Send one batch; returns whether a full batch went (more may be waiting).
        Raises what the database or the state file raised."""
        rows = self.outbox.peek(self.batch_size)
        if not rows:
            self.backlog = 0
            return False
        try:
            await asyncio.to_thread(self.results.write_batch, rows)
        except _ROW_ERRORS as exc:
            self._log.warning(
                "isolate",
                "results database refused a batch of %d (%s); sending one by one",
                len(rows),
                exc,
            )
            await self._one_by_one(rows)
        else:
            await self.outbox.remove(rows[-1].seq)
            self.forwarded += len(rows)
        self.backlog = self.outbox.count()
        return len(rows) == self.batch_size

    async def _one_by_one(self, rows: list[OutboxRow]) -> None:
        """Send `rows` one per transaction; set aside each the database refuses. An
        outage midway keeps the rest (and what went is removed from the outbox)."""
        done: int | None = None
        try:
            for row in rows:
                try:
                    await asyncio.to_thread(self.results.write_batch, [row])
                except _ROW_ERRORS as exc:
                    self._set_aside(row, exc)
                else:
                    self.forwarded += 1
                done = row.seq
        finally:
            if done is not None:
                await self.outbox.remove(done)

    def _set_aside(self, row: OutboxRow, exc: Exception) -> None:
        self.refused += 1
        reason = type(exc).__name__
        if self._refused_counter is not None:
            self._refused_counter.add(1, {"reason": reason})
        self._log.error(
            "refused",
            "results database refused the result of %r (revision %d), set aside: %s: %s",
            row.key[:200],
            row.revision,
            reason,
            str(exc).splitlines()[0] if str(exc) else "",
        )

    async def _run(self) -> None:
        delay = 0.0
        next_purge = time.monotonic() + self.purge_interval_s
        while True:
            if delay:
                await asyncio.sleep(delay)
            else:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout=self.idle_poll_s)
            self._wake.clear()
            try:
                more = True
                while more:  # each batch awaits the database and the state file: yields
                    more = await self.forward_once()
                if time.monotonic() >= next_purge:
                    next_purge = time.monotonic() + self.purge_interval_s
                    await self._purge()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # unreachable, a failing statement, a full disk
                if self.error is None:
                    log.error("results not reaching the database, kept in the outbox: %s", exc)
                self.error = str(exc)
                self._log.warning("forward", "results database: %s", exc)
                delay = min(max(delay * 2, 0.5), _MAX_BACKOFF_S)
                continue
            if self.error is not None:
                log.info("results database reachable again (%s)", self.results.label)
            self.error = None
            delay = 0.0

    async def _purge(self) -> None:
        cutoff = self.retention_cutoff() if self.retention_cutoff is not None else None
        if cutoff is not None:
            await asyncio.to_thread(self.results.purge_results, cutoff)
