"""`StateStore`: the local state file (SQLite, WAL) and its three parts.

    StateStore (writer.py: one writer thread, group commit, the file lock)
      .spans    SpanBuffer     the write-ahead span buffer (span_buffer.py): always here
      .results  SqliteResults  the results store (sqlite_results.py; `ResultsStore`)
      .windows  WindowJournal  the rolling windows' snapshot and journal

The parts share one file and one writer so that what must commit together does: a
result and its window-journal entry, a request and its routing. The methods below keep
the names callers used before the parts existed; new code may use the parts.
"""

from __future__ import annotations

import concurrent.futures
import sqlite3
from collections.abc import Callable, Collection, Iterable, Sequence
from pathlib import Path
from typing import TypeVar

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracepass.collector.records import SpanRecord
from tracepass.collector.state.codec import StoredResult
from tracepass.collector.state.failure_index import FailureModeIndex
from tracepass.collector.state.index import ResultFilter, ResultRow
from tracepass.collector.state.results import AgentCountRow, TrendRow
from tracepass.collector.state.schema import (
    JOURNAL_RESULT,
    JOURNAL_WINDOW,
    PAGE_SIZE,
    SCHEMA_VERSION,
    StateError,
)
from tracepass.collector.state.span_buffer import (
    Normalize,
    NormalizeLogs,
    SpanBuffer,
    StoredConversation,
)
from tracepass.collector.state.sqlite_results import _PUT_RESULT, ResultWrite, SqliteResults
from tracepass.collector.state.window_journal import JournalEntry, WindowJournal
from tracepass.collector.state.writer import Durability, SqliteFile

__all__ = [
    "JOURNAL_RESULT",
    "JOURNAL_WINDOW",
    "PAGE_SIZE",
    "SCHEMA_VERSION",
    "_PUT_RESULT",
    "Durability",
    "JournalEntry",
    "StateError",
    "StateStore",
    "StoredConversation",
]


T = TypeVar("T")


class StateStore(SqliteFile):
    def __init__(
        self,
        path: Path,
        *,
        durability: Durability = "batch",
        batch_max_delay_ms: float = 5.0,
        max_batch_ops: int = 1024,
    ) -> None:
        super().__init__(
            path,
            durability=durability,
            batch_max_delay_ms=batch_max_delay_ms,
            max_batch_ops=max_batch_ops,
        )
        self.spans = SpanBuffer(self)
        self.results = SqliteResults(self)
        self.windows = WindowJournal(self)

    def _opened(self, reader: sqlite3.Connection) -> None:
        self.results.failure_modes.load(reader)
        self.windows.opened(reader)

    @property
    def failure_modes(self) -> FailureModeIndex:
        """The failure-mode index of the stored results (`failure_index.py`)."""
        return self.results.failure_modes

    def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run the read-only query `fn` on the reader connection (blocking): the seam
        for index modules' own queries (`failure_index.py`)."""
        return fn(self.reader)

    @property
    def journal_seq_at_open(self) -> int:
        """The last window-journal entry written before this process opened the file."""
        return self.windows.seq_at_open

    # ---------------------------------------------------------------- span buffer

    async def write_spans(
        self,
        rows: Iterable[tuple[str, SpanRecord]],
        received_at: float,
        merges: Iterable[tuple[str, str]] = (),
    ) -> None:
        await self.spans.write_spans(rows, received_at, merges)

    async def write_request(
        self,
        request: ExportTraceServiceRequest | ExportLogsServiceRequest,
        keys: Sequence[str | None],
        received_at: float,
        merges: Iterable[tuple[str, str]] = (),
    ) -> None:
        await self.spans.write_request(request, keys, received_at, merges)

    def load(
        self, normalize: Normalize | None = None, normalize_logs: NormalizeLogs | None = None
    ) -> list[StoredConversation]:
        return self.spans.load(normalize, normalize_logs)

    def request_count(self) -> int:
        return self.spans.request_count()

    def span_count(self) -> int:
        return self.spans.span_count()

    def span_ids(self) -> set[tuple[str, str]]:
        return self.spans.span_ids()

    async def purge(self, closed_before: float, keep: Collection[str] = ()) -> int:
        return await self.spans.purge(closed_before, keep)

    async def discard(self, key: str) -> int:
        return await self.spans.discard(key)

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
        return await self.results.put_result(
            key,
            revision=revision,
            closed_at=closed_at,
            n_spans=n_spans,
            stored=stored,
            evaluated_at=evaluated_at,
            journal=journal,
        )

    async def put_results(self, writes: Sequence[ResultWrite]) -> list[int]:
        """Several `put_result`s as one writer operation (`SqliteResults.put_results`)."""
        return await self.results.put_results(writes)

    async def purge_results(self, evaluated_before: float) -> int:
        return await self.results.purge_results(evaluated_before)

    def get_result(self, key: str) -> StoredResult | None:
        return self.results.get_result(key)

    def list_results(
        self, where: ResultFilter, *, limit: int, cursor: tuple[float, str] | None = None
    ) -> tuple[list[ResultRow], tuple[float, str] | None]:
        return self.results.list_results(where, limit=limit, cursor=cursor)

    def reference_counts(
        self,
        since: float,
        *,
        agent_name: str | None = None,
        agent_version: str | None = None,
        reference_set: str | None = None,
    ) -> dict[str, tuple[int, int]]:
        return self.results.reference_counts(
            since, agent_name=agent_name, agent_version=agent_version, reference_set=reference_set
        )

    def outcome_trend(self, since: float, buckets: int) -> tuple[float, float, list[TrendRow]]:
        return self.results.outcome_trend(since, buckets)

    def version_costs(
        self, since: float, *, agent_name: str | None = None, reference_set: str | None = None
    ) -> dict[tuple[str | None, str | None], tuple[list[float | None], list[float | None]]]:
        return self.results.version_costs(since, agent_name=agent_name, reference_set=reference_set)

    def agent_counts(self, since: float) -> list[AgentCountRow]:
        return self.results.agent_counts(since)

    # ---------------------------------------------------------------- window journal

    def window_journal(self, after: int, upto: int) -> list[JournalEntry]:
        return self.windows.window_journal(after, upto)

    def put_blob(
        self, key: str, value: bytes, *, journal_upto: int | None = None
    ) -> concurrent.futures.Future[None]:
        return self.windows.put_blob(key, value, journal_upto=journal_upto)

    def journal_upto(self, key: str) -> int:
        return self.windows.journal_upto(key)

    def get_blob(self, key: str) -> bytes | None:
        return self.windows.get_blob(key)
