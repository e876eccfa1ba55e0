"""The results store in the local state file (the default): `ResultsStore` over SQLite.

Results are written in the writer's group commit with their window-journal entry
(`put_result`); the read model's queries read the `results` table's indexed columns
(`index.py`), never decoding stored results. The `results` rows double as the span
buffer's record of which conversations were evaluated (revision, close time, spans).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tracepass.collector.state.aggregates import AgentCountRow, agent_counts, reference_counts
from tracepass.collector.state.codec import (
    StoredResult,
    ToolsByDigest,
    decode_result,
    encode_result,
)
from tracepass.collector.state.failure_index import PRIOR, FailureModeIndex, stored_signatures
from tracepass.collector.state.index import (
    INDEX_COLUMNS,
    ResultFilter,
    ResultRow,
    index_values,
    list_results,
    version_costs,
    violation_rows,
    write_violations,
)
from tracepass.collector.state.outbox import put_outbox
from tracepass.collector.state.reference_tools import ReferenceTools, ToolsRow, sqlite_tools
from tracepass.collector.state.results import UNREFERENCED_SQL, decode_unreferenced
from tracepass.collector.state.window_journal import append_entry
from tracepass.collector.state.writer import SqliteFile

__all__ = ["ResultWrite", "SqliteResults"]

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


@dataclass(frozen=True, slots=True)
class ResultWrite:
    """One evaluation to store (`put_result`'s arguments)."""

    key: str
    revision: int
    closed_at: float
    n_spans: int
    stored: StoredResult
    evaluated_at: float
    journal: str | None = None


@dataclass(frozen=True, slots=True)
class _Prepared:
    """A `ResultWrite` with what the loop derives from it before the writer runs."""

    write: ResultWrite
    text: str
    indexed: tuple[Any, ...]
    violations: list[tuple[str, str | None]] | None
    signatures: tuple[str, ...]
    tools: ToolsRow | None  # the `reference_tools` row the text names (format 4)


class SqliteResults:
    """`ResultsStore` (and the writes) over the state file `db`."""

    def __init__(self, db: SqliteFile) -> None:
        self.db = db
        # True with a shared results database: results go to the outbox (`outbox.py`),
        # and only their bookkeeping stays in the local `results` table.
        self.forward = False
        # Failure signatures per failing result (`failure_index.py`); its bound
        # (`failure_modes.max_per_version`) may be set before `open()`.
        self.failure_modes = FailureModeIndex()
        # Each reference's expected tools, stored once (`reference_tools.py`): the
        # encode side, the digests this file is known to hold, and the read side.
        self.reference_tools = ReferenceTools()
        self._tools_stored: set[str] = set()
        self._tools = sqlite_tools(lambda sql, args: self.db.reader.execute(sql, args))

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
        deleted = await self.db.run(op)
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
        write = ResultWrite(key, revision, closed_at, n_spans, stored, evaluated_at, journal)
        return (await self.put_results([write]))[0]

    async def put_results(self, writes: Sequence[ResultWrite]) -> list[int]:
        """`put_result` of several evaluations as ONE writer operation (one op, one
        wake-up; what the pipeline does with the conversations one loop iteration
        completed). All or nothing: if it fails, nothing of it is stored (the caller may
        store them one by one to isolate a bad one). Returns their journal sequence
        numbers, in order."""
        # Derived here, on the event loop's side: cheap (no I/O) and keeps the writer
        # thread's transactions short.
        prepared = [self._prepare(w) for w in writes]
        # The failure-mode rows each op run replaced: counted once the commit succeeded
        # (an op may run twice, so it only records them).
        modes: list[Any] = [((), ())] * len(prepared)

        keys = [p.write.key for p in prepared]
        # The prior rows of a batch in one query (a key twice in it: one query each, so
        # the second sees the first's row).
        batched = len(prepared) > 1 and not self.forward and len(set(keys)) == len(keys)

        tools = {
            p.tools.digest: p.tools.tools
            for p in prepared
            if p.tools is not None and p.tools.digest not in self._tools_stored
        }

        def op(conn: sqlite3.Connection) -> list[int]:
            # A result and its window-journal entry commit together or not at all: an
            # op is all or nothing (`_apply`).
            if tools:  # before the rows naming them, in the same transaction
                conn.executemany(
                    "INSERT OR IGNORE INTO reference_tools (digest, tools) VALUES (?,?)",
                    tools.items(),
                )
            priors = self.failure_modes.priors(conn, keys) if batched else None
            inserts: list[tuple[Any, ...]] = []
            seqs = []
            for i, p in enumerate(prepared):
                seqs.append(self._write(conn, p, modes, i, priors, inserts))
                if priors is None:  # the next one may be this key again: rows in now
                    self.failure_modes.insert(conn, inserts)
                    inserts.clear()
            self.failure_modes.insert(conn, inserts)
            return seqs

        seqs = await self.db.run(op)
        self._tools_stored.update(tools)
        self.failure_modes.applied_many(
            (change, p.indexed[0], p.indexed[1], p.write.closed_at)
            for p, change in zip(prepared, modes, strict=True)
        )
        return seqs

    def _prepare(self, write: ResultWrite) -> _Prepared:
        stored = write.stored
        signatures = stored_signatures(stored)
        tools = None if stored.result is None else self.reference_tools.of(stored.result)
        return _Prepared(
            write,
            encode_result(stored, None if tools is None else tools.digest),
            index_values(stored, signatures),
            violation_rows(stored) if self.forward else None,
            signatures,
            tools,
        )

    def _write(
        self,
        conn: sqlite3.Connection,
        p: _Prepared,
        modes: list[Any],
        i: int,
        priors: dict[str, tuple[Any, Any]] | None,
        inserts: list[tuple[Any, ...]],
    ) -> int:
        """One prepared result's rows (inside the writer's transaction); its failure-mode
        rows are appended to `inserts`; `priors`: the batch's prior rows (None: look
        this one up)."""
        w = p.write
        key = w.key
        if p.violations is not None:
            put_outbox(
                conn,
                key,
                revision=w.revision,
                closed_at=w.closed_at,
                evaluated_at=w.evaluated_at,
                n_spans=w.n_spans,
                view=p.text,
                indexed=p.indexed,
                violations=p.violations,
                tools=None if p.tools is None else p.tools.digest,
            )
        else:
            prior = conn.execute(PRIOR, (key,)).fetchone() if priors is None else priors.get(key)
            changed = conn.execute(
                _PUT_RESULT,
                (key, w.revision, w.closed_at, w.evaluated_at, w.n_spans, p.text, *p.indexed),
            ).rowcount
            if changed:
                write_violations(conn, key, w.stored, w.closed_at, replacing=prior is not None)
            if changed and (p.signatures or prior is not None):
                modes[i] = self.failure_modes.replace_rows(
                    conn, key, w.stored, p.signatures, w.closed_at, prior, inserts
                )
        if w.journal is None:
            return 0
        return append_entry(conn, key, w.revision, w.evaluated_at, w.journal)

    def get_result(self, key: str) -> StoredResult | None:
        """The latest stored evaluation of `key`, in any stored format."""
        row = self.db.reader.execute("SELECT view FROM results WHERE conv_key=?", (key,)).fetchone()
        if row is None:
            return None
        return decode_result(row[0], self._tools)

    @property
    def shared(self) -> bool:
        return False

    def unreferenced_results(self, limit: int) -> list[StoredResult]:
        rows = self.db.reader.execute(UNREFERENCED_SQL, (limit,)).fetchall()
        return decode_unreferenced(rows, self._tools)

    def tools_lookup(self) -> ToolsByDigest:
        """What resolves format-4 rows' expected tools read from this file."""
        return self._tools

    def list_results(
        self, where: ResultFilter, *, limit: int, cursor: tuple[float, str] | None = None
    ) -> tuple[list[ResultRow], tuple[float, str] | None]:
        """One page of stored results matching `where`, newest first (`index.py`)."""
        return list_results(self.db.reader, where, limit=limit, cursor=cursor)

    def read_connection(self) -> sqlite3.Connection | None:
        """The state file's read connection (the API installs its time limit on it)."""
        return self.db.read_connection()

    def reference_counts(
        self,
        since: float,
        *,
        agent_name: str | None = None,
        agent_version: str | None = None,
        reference_set: str | None = None,
    ) -> dict[str, tuple[int, int]]:
        return reference_counts(
            self.db.reader,
            since,
            agent_name=agent_name,
            agent_version=agent_version,
            reference_set=reference_set,
        )

    def version_costs(
        self, since: float, *, agent_name: str | None = None, reference_set: str | None = None
    ) -> dict[tuple[str | None, str | None], tuple[list[float | None], list[float | None]]]:
        """Costs and durations per (agent, version) since `since` (`index.version_costs`)."""
        return version_costs(
            self.db.reader, since, agent_name=agent_name, reference_set=reference_set
        )

    def outcome_trend(
        self, since: float, buckets: int
    ) -> tuple[float, float, list[tuple[str | None, str | None, int, int, int]]]:
        """Trials and passes per agent version in `buckets` equal time slices spanning
        the results completed since `since` (first to last of them): returns (start,
        slice seconds, rows of (agent, version, slice index, trials, passes)). Trials
        count as in `reference_counts`."""
        trial = (
            "closed_at >= ? AND reference_id IS NOT NULL "
            "AND outcome IN ('pass','fail','incomplete')"
        )
        lo, hi = self.db.reader.execute(
            f"SELECT min(closed_at), max(closed_at) FROM results WHERE {trial}", (since,)
        ).fetchone()
        if lo is None:
            return since, 0.0, []
        width = max((float(hi) - float(lo)) / buckets, 1e-3)
        rows = self.db.reader.execute(
            "SELECT agent_name, agent_version, "
            f"min(CAST((closed_at - ?) / ? AS INTEGER), {buckets - 1}) AS b, "
            f"count(*), sum(outcome='pass') FROM results WHERE {trial} "
            "GROUP BY agent_name, agent_version, b",
            (lo, width, since),
        )
        return float(lo), width, [(a, v, int(b), int(n), int(c or 0)) for a, v, b, n, c in rows]

    def latest_failures(
        self, limit: int = 1000
    ) -> list[tuple[str | None, str | None, str | None, str, str]]:
        """(agent, version, reference set, conversation id, trace id) of the latest
        failing result of each series, at most `limit` series: what restores the alert's
        example trace (`tracepass_failure_example`) after a restart. SQLite returns the
        bare columns of the row holding max(closed_at)."""
        rows = self.db.reader.execute(
            "SELECT agent_name, agent_version, reference_set, conv_key, summary, "
            "max(closed_at) FROM results WHERE outcome = 'fail' "
            "GROUP BY agent_name, agent_version, reference_set LIMIT ?",
            (limit,),
        )
        out = []
        for agent, version, rset, key, summary, _ in rows:
            try:
                traces = json.loads(summary or "{}").get("trace_ids") or []
            except (ValueError, AttributeError):
                traces = []
            if traces and isinstance(traces[0], str):
                out.append((agent, version, rset, str(key), traces[0]))
        return out

    def agent_counts(self, since: float) -> list[AgentCountRow]:
        return agent_counts(self.db.reader, since)
