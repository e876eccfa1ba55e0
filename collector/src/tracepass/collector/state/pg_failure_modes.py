"""The failure-mode index in the PostgreSQL results store (`state.results_url`): what
`failure_index.py` keeps in the state file, kept in the shared database instead, so any
replica's `/api/v1/failure-modes` counts every replica's failing conversations.

The same rows (`result_failure_modes`: one per failing conversation and signature, the
`failure_mode=` list filter pages through them) and, instead of in-memory counters that
each replica would only fill with its own results, counter tables updated in the batch
transaction that stores the results (`PostgresResults.write_batch`):

    failure_mode_minutes  (agent, version, reference set, signature, minute) → n, first, last
    failure_mode_hours    the same per hour (whole-range totals and trends read these)
    failure_mode_versions (agent, version) → first result seen (the `new` baseline order)
    failure_mode_signatures (agent, version, signature): admitted under the bound

Failing conversations are counted under the empty signature (`MARKER`), as in SQLite.
A query sums a few hundred counter rows: no scan of the rows, no decoding of results.
Counter rows are touched in key order, so replicas writing the same cells concurrently
wait for each other instead of deadlocking. A re-evaluation removes its earlier rows
(and their counts: first/last seen of the cells are not narrowed, as in SQLite) and
retention takes purged results' rows with them.

The bound (`failure_modes.max_per_version`) is shared: a signature new to a version is
admitted under an advisory lock per version, so replicas together admit at most the
bound; the rest are stored as `other`. The counter tables key a missing agent, version
or reference set as '' (a primary key has no NULLs), as the SQLite counters do.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import psycopg

from tracepass.collector.state.failure_index import (
    HOUR,
    MARKER,
    MINUTE,
    VERSION_CACHE_BYTES,
    VERSION_CACHE_ENTRIES,
    ModeCounts,
    ModeScope,
    known_signatures_cache,
    scope_where,
    top_modes,
    version_before,
)
from tracepass.collector.state.index import INDEX_COLUMNS
from tracepass.evaluator.bounded_cache import BoundedCache
from tracepass.evaluator.scoring.failure_signatures import OTHER

__all__ = ["FAILURE_MODES_PG_SCHEMA", "ModeEntry", "PostgresFailureModes"]

_COUNTS = """
CREATE TABLE IF NOT EXISTS {table} (
    agent_name TEXT NOT NULL,
    agent_version TEXT NOT NULL,
    reference_set TEXT NOT NULL,
    signature TEXT NOT NULL,
    slot BIGINT NOT NULL,
    n INTEGER NOT NULL,
    first_at DOUBLE PRECISION NOT NULL,
    last_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (agent_name, agent_version, reference_set, signature, slot)
);
"""
FAILURE_MODES_PG_SCHEMA = (
    """
CREATE TABLE IF NOT EXISTS result_failure_modes (
    signature TEXT NOT NULL,
    conv_key TEXT NOT NULL,
    closed_at DOUBLE PRECISION NOT NULL,
    agent_name TEXT,
    agent_version TEXT,
    reference_set TEXT,
    outcome TEXT,
    PRIMARY KEY (signature, closed_at, conv_key)
);
CREATE INDEX IF NOT EXISTS result_failure_modes_conv ON result_failure_modes (conv_key);
"""
    + _COUNTS.format(table="failure_mode_minutes")
    + _COUNTS.format(table="failure_mode_hours")
    + """
CREATE INDEX IF NOT EXISTS failure_mode_minutes_slot ON failure_mode_minutes (slot);
CREATE TABLE IF NOT EXISTS failure_mode_versions (
    agent_name TEXT NOT NULL,
    agent_version TEXT NOT NULL,
    first_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (agent_name, agent_version)
);
CREATE TABLE IF NOT EXISTS failure_mode_signatures (
    agent_name TEXT NOT NULL,
    agent_version TEXT NOT NULL,
    signature TEXT NOT NULL,
    PRIMARY KEY (agent_name, agent_version, signature)
);
"""
)
_GRAINS = (("failure_mode_minutes", MINUTE), ("failure_mode_hours", HOUR))
_SUMMARY = [name for name, _ in INDEX_COLUMNS].index("summary")
# Any constant: the advisory-lock namespace of the per-version signature bound.
_BOUND_LOCK = 0x7466_6D62  # "tfmb"

Scope = tuple[str, str, str]
# (signature, closed_at, agent, version, reference set) of one row, as in SQLite.
Row = tuple[str, float, str | None, str | None, str | None]


class _Pool(Protocol):
    """What this needs of `PostgresResults`: a pooled connection for a read."""

    def reading(self) -> Any: ...


@dataclass(frozen=True, slots=True)
class ModeEntry:
    """One stored result as the index sees it (from an outbox row's index values)."""

    key: str
    closed_at: float
    agent_name: str | None
    agent_version: str | None
    reference_set: str | None
    outcome: str | None
    modes: tuple[str, ...]  # its failure signatures (empty: not failing)

    @classmethod
    def of(cls, key: str, closed_at: float, indexed: Sequence[Any]) -> ModeEntry:
        summary = indexed[_SUMMARY]
        modes: Sequence[str] = ()
        if summary and '"modes"' in summary:
            try:
                modes = json.loads(summary).get("modes") or ()
            except ValueError:
                modes = ()
        return cls(key, closed_at, indexed[0], indexed[1], indexed[2], indexed[4], tuple(modes))


def _scope(agent: str | None, version: str | None, rset: str | None) -> Scope:
    return (agent or "", version or "", rset or "")


class _Deltas:
    """Counter changes of one transaction: cell → [added, removed, first, last]."""

    def __init__(self) -> None:
        self.cells: dict[tuple[str, tuple[str, str, str, str, int]], list[Any]] = {}

    def add(self, rows: Iterable[Row], sign: int) -> None:
        for signature, at, agent, version, rset in rows:
            scope = _scope(agent, version, rset)
            for table, grain in _GRAINS:
                key = (table, (*scope, signature, int(at // grain)))
                cell = self.cells.setdefault(key, [0, 0, math.inf, -math.inf])
                if sign > 0:
                    cell[0] += 1
                    cell[2] = min(cell[2], at)
                    cell[3] = max(cell[3], at)
                else:
                    cell[1] += 1
                    if cell[0] == 0:  # only removed: its times do not matter (n drops)
                        cell[2] = min(cell[2], at)
                        cell[3] = max(cell[3], at)

    def apply(self, conn: psycopg.Connection[Any]) -> None:
        """Upsert every changed cell in key order (replicas lock cells in one order),
        then drop the cells counted down to nothing."""
        for table, _ in _GRAINS:
            cells = sorted((key, value) for (t, key), value in self.cells.items() if t == table)
            cells = [(k, v) for k, v in cells if v[0] != v[1] or v[0]]
            if not cells:
                continue
            args = [(*k, v[0] - v[1], v[2], v[3], v[0]) for k, v in cells]
            with conn.cursor() as cur:
                cur.executemany(
                    f"INSERT INTO {table} AS t VALUES (%s,%s,%s,%s,%s,%s,%s,%s) "
                    "ON CONFLICT (agent_name, agent_version, reference_set, signature, slot) "
                    "DO UPDATE SET n = t.n + excluded.n, "
                    "first_at = CASE WHEN %s > 0 THEN LEAST(t.first_at, excluded.first_at) "
                    "ELSE t.first_at END, "
                    "last_at = CASE WHEN %s > 0 THEN GREATEST(t.last_at, excluded.last_at) "
                    "ELSE t.last_at END",
                    [(*a[:8], a[8], a[8]) for a in args],
                )
            gone = [k for k, v in cells if v[1]]
            if gone:
                with conn.cursor() as cur:
                    cur.executemany(
                        f"DELETE FROM {table} WHERE agent_name = %s AND agent_version = %s "
                        "AND reference_set = %s AND signature = %s AND slot = %s AND n <= 0",
                        gone,
                    )


class PostgresFailureModes:
    """Writes (inside `write_batch`'s and `purge_results`' transactions) and reads
    (`FailureModeQueries`) of the failure modes in PostgreSQL."""

    def __init__(self, pool: _Pool, max_per_version: int = 200) -> None:
        self.pool = pool
        self.max_per_version = max_per_version
        # (agent, version) → signatures the database admitted (committed; this process;
        # a bounded cache: a version dropped from it is re-read under the lock).
        self._known: BoundedCache[tuple[str, str], set[str]] = known_signatures_cache()
        # (agent, version) → the first result the database has for it, as far as known
        # (a cache that only saves writes: a version that left it is written again).
        self._first: BoundedCache[tuple[str, str], float] = BoundedCache(
            "failure_mode_firsts", max_entries=VERSION_CACHE_ENTRIES, max_bytes=VERSION_CACHE_BYTES
        )

    # ------------------------------------------------------------------ writing

    def write(
        self, conn: psycopg.Connection[Any], changed: Sequence[str], entries: Sequence[ModeEntry]
    ) -> tuple[dict[tuple[str, str], set[str]], dict[tuple[str, str], float]]:
        """Replace the rows of the `changed` keys by `entries`' (their new results) and
        count the difference. Returns what `committed` notes once the commit succeeded."""
        deltas = _Deltas()
        if changed:
            self._remove(conn, "conv_key = ANY(%s)", (list(changed),), deltas)
        admitted = self._admit(conn, entries)
        rows: list[tuple[Any, ...]] = []
        for e in entries:
            if not e.modes:
                continue
            version = (e.agent_name or "", e.agent_version or "")
            allowed = admitted.get(version, set()) | (self._known.get(version) or set())
            kept: list[str] = []
            for signature in e.modes:
                if signature != OTHER and signature not in allowed:
                    signature = OTHER
                if signature not in kept:
                    kept.append(signature)
            added: list[Row] = [
                (MARKER, e.closed_at, e.agent_name, e.agent_version, e.reference_set)
            ]
            added += [
                (s, e.closed_at, e.agent_name, e.agent_version, e.reference_set) for s in kept
            ]
            deltas.add(added, 1)
            rows += [
                (s, e.key, e.closed_at, e.agent_name, e.agent_version, e.reference_set, e.outcome)
                for s in kept
            ]
        if rows:
            rows.sort(key=lambda r: (r[0], r[2], r[1]))
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO result_failure_modes VALUES (%s,%s,%s,%s,%s,%s,%s) "
                    "ON CONFLICT DO NOTHING",
                    rows,
                )
        firsts = self._versions(conn, entries)
        deltas.apply(conn)
        return admitted, firsts

    def committed(
        self, noted: tuple[dict[tuple[str, str], set[str]], dict[tuple[str, str], float]]
    ) -> None:
        """What a committed `write` admitted and recorded, remembered (after the commit:
        a rolled-back transaction must not leave signatures 'known')."""
        admitted, firsts = noted
        for version, signatures in admitted.items():
            known = self._known.get(version)
            self._known.put(version, signatures if known is None else known | signatures)
        for version, at in firsts.items():
            self._first.put(version, min(self._known_first(version), at))

    def purge(self, conn: psycopg.Connection[Any], evaluated_before: float) -> None:
        """Delete the rows of the results retention deletes (before they go)."""
        self._remove(
            conn,
            "conv_key IN (SELECT conv_key FROM results WHERE evaluated_at < %s)",
            (evaluated_before,),
            deltas := _Deltas(),
        )
        deltas.apply(conn)

    @staticmethod
    def _remove(
        conn: psycopg.Connection[Any], where: str, args: Sequence[Any], deltas: _Deltas
    ) -> None:
        removed = conn.execute(
            f"DELETE FROM result_failure_modes WHERE {where} "
            "RETURNING conv_key, signature, closed_at, agent_name, agent_version, reference_set",
            args,
        ).fetchall()
        markers: dict[str, Row] = {}
        for key, signature, at, agent, version, rset in removed:
            deltas.add([(signature, float(at), agent, version, rset)], -1)
            markers[key] = (MARKER, float(at), agent, version, rset)
        deltas.add(markers.values(), -1)

    def _admit(
        self, conn: psycopg.Connection[Any], entries: Sequence[ModeEntry]
    ) -> dict[tuple[str, str], set[str]]:
        """Signatures new to their version, admitted under the shared bound (an advisory
        lock per version, taken in order, then the admitted set re-read)."""
        unknown: dict[tuple[str, str], list[str]] = {}
        for e in entries:
            version = (e.agent_name or "", e.agent_version or "")
            known = self._known.get(version) or set()
            for signature in e.modes:
                if signature != OTHER and signature not in known:
                    waiting = unknown.setdefault(version, [])
                    if signature not in waiting:
                        waiting.append(signature)
        admitted: dict[tuple[str, str], set[str]] = {}
        for version in sorted(unknown):
            agent, ver = version
            conn.execute(
                "SELECT pg_advisory_xact_lock(%s, hashtext(%s))",
                (_BOUND_LOCK, f"{agent}\x1f{ver}"),
            )
            stored = {
                str(s)
                for (s,) in conn.execute(
                    "SELECT signature FROM failure_mode_signatures "
                    "WHERE agent_name = %s AND agent_version = %s",
                    version,
                )
            }
            fresh = []
            for signature in unknown[version]:
                if signature in stored:
                    continue
                if len(stored) >= self.max_per_version:
                    break
                stored.add(signature)
                fresh.append((agent, ver, signature))
            if fresh:
                with conn.cursor() as cur:
                    cur.executemany(
                        "INSERT INTO failure_mode_signatures VALUES (%s,%s,%s) "
                        "ON CONFLICT DO NOTHING",
                        fresh,
                    )
            admitted[version] = stored
        return admitted

    def _known_first(self, version: tuple[str, str]) -> float:
        found = self._first.get(version)
        return math.inf if found is None else found

    def _versions(
        self, conn: psycopg.Connection[Any], entries: Sequence[ModeEntry]
    ) -> dict[tuple[str, str], float]:
        """Record each version's first result (only where this batch may move it: the
        row is usually left alone, so replicas do not queue on it)."""
        firsts: dict[tuple[str, str], float] = {}
        for e in entries:
            version = (e.agent_name or "", e.agent_version or "")
            if e.closed_at < min(firsts.get(version, math.inf), self._known_first(version)):
                firsts[version] = e.closed_at
        if firsts:
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO failure_mode_versions AS v VALUES (%s,%s,%s) "
                    "ON CONFLICT (agent_name, agent_version) DO UPDATE SET "
                    "first_at = LEAST(v.first_at, excluded.first_at)",
                    [(*k, at) for k, at in sorted(firsts.items())],
                )
        return firsts

    # ------------------------------------------------------------------ reading

    def _totals(
        self, conn: psycopg.Connection[Any], scope: ModeScope
    ) -> dict[str, tuple[int, float, float]]:
        where, args = scope_where(scope, times=False, mark="%s")
        if scope.since is None and scope.until is None:
            sql = (
                "SELECT signature, sum(n), min(first_at), max(last_at) "
                f"FROM failure_mode_hours WHERE TRUE{where} GROUP BY signature"
            )
            rows = conn.execute(sql, args).fetchall()
            return {str(s): (int(n), float(f), float(la)) for s, n, f, la in rows if n > 0}
        # Whole minutes, as the SQLite counters answer a range: per scope and signature,
        # its first/last seen clipped to the selected minutes, then merged.
        lo, hi = _minutes(scope)
        key = "agent_name, agent_version, reference_set, signature"
        inside = conn.execute(
            f"SELECT {key}, sum(n), min(slot), max(slot) FROM failure_mode_minutes "
            f"WHERE slot >= %s AND slot < %s{where} GROUP BY {key}",
            [lo, hi, *args],
        ).fetchall()
        whole = {
            tuple(r[:4]): (float(r[4]), float(r[5]))
            for r in conn.execute(
                f"SELECT {key}, min(first_at), max(last_at) FROM failure_mode_hours "
                f"WHERE TRUE{where} GROUP BY {key}",
                args,
            )
        }
        out: dict[str, tuple[int, float, float]] = {}
        for agent, version, rset, signature, n, first_slot, last_slot in inside:
            if n <= 0:
                continue
            first, last = whole.get((agent, version, rset, signature), (math.inf, -math.inf))
            first = max(first, int(first_slot) * MINUTE)
            last = min(last, (int(last_slot) + 1) * MINUTE)
            count, f0, l0 = out.get(str(signature), (0, math.inf, -math.inf))
            out[str(signature)] = (count + int(n), min(f0, first), max(l0, last))
        return out

    def _trend(
        self, conn: psycopg.Connection[Any], scope: ModeScope, signatures: Sequence[str]
    ) -> dict[str, list[tuple[float, int]]]:
        where, args = scope_where(scope, times=False, mark="%s")
        if scope.since is None and scope.until is None:
            table, grain, bounds, bound_args = "failure_mode_hours", HOUR, "", []
        else:
            lo, hi = _minutes(scope)
            table, grain = "failure_mode_minutes", MINUTE
            bounds, bound_args = " AND slot >= %s AND slot < %s", [lo, hi]
        out: dict[str, list[tuple[float, int]]] = {s: [] for s in signatures}
        for signature, slot, n in conn.execute(
            f"SELECT signature, slot, sum(n) FROM {table} WHERE signature = ANY(%s)"
            f"{bounds}{where} GROUP BY signature, slot",
            [list(signatures), *bound_args, *args],
        ):
            out[str(signature)].append((int(slot) * grain, int(n)))
        return out

    def _examples(
        self, conn: psycopg.Connection[Any], scope: ModeScope, mode: ModeCounts, n: int
    ) -> list[str]:
        where, args = scope_where(scope, mark="%s")
        return [
            str(k)
            for (k,) in conn.execute(
                "SELECT conv_key FROM result_failure_modes WHERE signature = %s "
                f"AND closed_at <= %s{where} ORDER BY closed_at DESC, conv_key DESC LIMIT %s",
                [mode.signature, mode.last_seen, *args, n],
            )
        ]

    def top_modes(
        self, scope: ModeScope, *, limit: int, examples: int = 3
    ) -> tuple[int, list[ModeCounts]]:
        """(failing conversations in scope, the `limit` most frequent modes): the
        SQLite index's answer (`FailureModeIndex.top_modes`), from the shared tables."""
        with self.pool.reading() as conn:
            totals = self._totals(conn, scope)
            return top_modes(
                totals,
                limit=limit,
                trend=lambda signatures: self._trend(conn, scope, signatures),
                examples=lambda mode: self._examples(conn, scope, mode, examples),
            )

    def signatures_of_version(self, scope: ModeScope) -> set[str]:
        """The signatures seen in `scope` (any time): what `new` compares against."""
        where, args = scope_where(scope, times=False, mark="%s")
        with self.pool.reading() as conn:
            rows = conn.execute(
                f"SELECT DISTINCT signature FROM failure_mode_hours WHERE signature <> ''{where}",
                args,
            ).fetchall()
        return {str(s) for (s,) in rows}

    def _firsts(self, agent: str | None = None) -> dict[tuple[str, str], float]:
        sql = "SELECT agent_name, agent_version, first_at FROM failure_mode_versions"
        args: list[Any] = []
        if agent is not None:
            sql += " WHERE agent_name = %s"
            args.append(agent)
        with self.pool.reading() as conn:
            return {(str(a), str(v)): float(t) for a, v, t in conn.execute(sql, args)}

    def previous_version(self, agent: str | None, version: str) -> str | None:
        """The version of `agent` first seen just before `version` (None: none)."""
        return version_before({v: t for (_, v), t in self._firsts(agent or "").items()}, version)

    def versions(self, agent: str | None = None) -> list[tuple[str, str]]:
        """(agent, version) pairs with stored results, newest first."""
        firsts = self._firsts(agent)
        return sorted(firsts, key=lambda p: firsts[p], reverse=True)


def _minutes(scope: ModeScope) -> tuple[int, int]:
    """The minute slots a time range selects, [lo, hi) (as `ModeCounters` reads them)."""
    lo = -(2**62) if scope.since is None else math.floor(scope.since / MINUTE)
    hi = 2**62 if scope.until is None else math.ceil(scope.until / MINUTE)
    return int(lo), int(hi)
