"""The failure-mode index: one row per (failing conversation, failure signature), kept
in the same transaction as the result, so "the top failure modes of v1.1" is a grouped
read of an index range, never a decode of stored results.

Each failing result also gets one marker row with the empty signature: counting those
in a scope is the number of failing conversations (the denominator of a mode's share),
read from the same covering index.

Bounds: at most `max_per_version` distinct signatures per agent version; a result's
signatures beyond that are stored as `other` (the set per version is kept in memory by
the writer thread, loaded from the table on first use). The signatures themselves are
bounded by `failure_signatures.bound`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tracepass.collector.state.codec import StoredResult
from tracepass.evaluator.explain import failure_analysis
from tracepass.evaluator.failure_signatures import OTHER, is_failing

__all__ = [
    "FAILURE_INDEX_SCHEMA",
    "MARKER",
    "FailureModeIndex",
    "ModeCounts",
    "ModeScope",
    "stored_signatures",
]

MARKER = ""  # the per-failing-conversation row's signature
FAILURE_INDEX_SCHEMA = """
CREATE TABLE IF NOT EXISTS result_failure_modes (
    signature TEXT NOT NULL,
    conv_key TEXT NOT NULL,
    closed_at REAL NOT NULL,
    agent_name TEXT,
    agent_version TEXT,
    reference_set TEXT,
    outcome TEXT,
    PRIMARY KEY (signature, conv_key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS result_failure_modes_recent
    ON result_failure_modes (signature, closed_at, conv_key, outcome);
CREATE INDEX IF NOT EXISTS result_failure_modes_scope
    ON result_failure_modes (agent_name, agent_version, signature, closed_at, reference_set);
CREATE INDEX IF NOT EXISTS result_failure_modes_conv ON result_failure_modes (conv_key);
CREATE TABLE IF NOT EXISTS failure_mode_versions (
    agent_name TEXT NOT NULL,
    agent_version TEXT NOT NULL,
    first_seen REAL NOT NULL,
    PRIMARY KEY (agent_name, agent_version)
) WITHOUT ROWID;
"""
_INSERT = "INSERT OR IGNORE INTO result_failure_modes VALUES (?,?,?,?,?,?,?)"


def stored_signatures(stored: StoredResult) -> tuple[str, ...]:
    """The failure signatures of a stored evaluation (empty: not failing). Shares the
    analysis the list's reasons were computed with (`explain.failure_analysis`)."""
    result = stored.result
    if result is None or not is_failing(result):
        return ()
    return failure_analysis(result, stored.conversation.complete).signatures


@dataclass(frozen=True, slots=True)
class ModeScope:
    """Which failures a query counts (None: any)."""

    agent_name: str | None = None
    agent_version: str | None = None
    reference_set: str | None = None
    since: float | None = None
    until: float | None = None


@dataclass(slots=True)
class ModeCounts:
    signature: str
    count: int
    first_seen: float
    last_seen: float
    examples: list[str] = field(default_factory=list)
    trend: list[int] = field(default_factory=list)


class FailureModeIndex:
    """Writes (writer thread) and reads (reader connection) of the failure-mode rows."""

    def __init__(self, max_per_version: int = 200) -> None:
        self.max_per_version = max_per_version
        # (agent, version) → signatures stored for it (writer thread only).
        self._known: dict[tuple[str, str], set[str]] = {}

    # ------------------------------------------------------------------ writing

    def write(
        self,
        conn: sqlite3.Connection,
        key: str,
        stored: StoredResult,
        signatures: Sequence[str],
        closed_at: float,
        replacing: bool = True,
    ) -> None:
        """Replace the rows of `key` by `signatures` (inside the writer's transaction)."""
        if replacing:
            conn.execute("DELETE FROM result_failure_modes WHERE conv_key=?", (key,))
        result = stored.result
        if not signatures or result is None:
            return
        conv = stored.conversation
        agent = result.agent_name if result.agent_name is not None else conv.agent_name
        version = result.agent_version if result.agent_version is not None else conv.agent_version
        known = self._known_of(conn, agent or "", version or "", closed_at)
        rows: list[tuple[Any, ...]] = []
        kept: set[str] = set()
        for signature in (MARKER, *signatures):
            if signature and signature not in known:
                if len(known) >= self.max_per_version:
                    signature = OTHER
                known.add(signature)
            if signature in kept:
                continue
            kept.add(signature)
            rows.append(
                (
                    signature,
                    key,
                    closed_at,
                    agent,
                    version,
                    result.reference_set,
                    result.outcome.value,
                )
            )
        conn.executemany(_INSERT, rows)

    def _known_of(
        self, conn: sqlite3.Connection, agent: str, version: str, closed_at: float
    ) -> set[str]:
        known = self._known.get((agent, version))
        if known is None:
            known = {
                s
                for (s,) in conn.execute(
                    "SELECT DISTINCT signature FROM result_failure_modes "
                    "WHERE coalesce(agent_name,'')=? AND coalesce(agent_version,'')=? "
                    "AND signature != ''",
                    (agent, version),
                )
            }
            # OTHER never counts against the bound.
            known.discard(OTHER)
            self._known[(agent, version)] = known
            conn.execute(
                "INSERT INTO failure_mode_versions VALUES (?,?,?) ON CONFLICT DO UPDATE "
                "SET first_seen=min(first_seen, excluded.first_seen)",
                (agent, version, closed_at),
            )
        return known

    @staticmethod
    def delete(conn: sqlite3.Connection, keys_sql: str, args: Sequence[Any]) -> None:
        """Delete the rows of the conversations `keys_sql` (a SELECT of conv_keys) names."""
        conn.execute(f"DELETE FROM result_failure_modes WHERE conv_key IN ({keys_sql})", args)

    # ------------------------------------------------------------------ reading

    @staticmethod
    def _where(scope: ModeScope) -> tuple[str, list[Any]]:
        clauses: list[str] = []
        args: list[Any] = []
        for column in ("agent_name", "agent_version", "reference_set"):
            value = getattr(scope, column)
            if value is not None:
                clauses.append(f"{column} = ?")
                args.append(value)
        if scope.since is not None:
            clauses.append("closed_at >= ?")
            args.append(scope.since)
        if scope.until is not None:
            clauses.append("closed_at < ?")
            args.append(scope.until)
        return (" AND " + " AND ".join(clauses)) if clauses else "", args

    def modes(
        self,
        conn: sqlite3.Connection,
        scope: ModeScope,
        *,
        limit: int,
        examples: int = 3,
        trend_buckets: int = 8,
    ) -> tuple[int, list[ModeCounts]]:
        """(failing conversations in scope, the `limit` most frequent modes with their
        latest `examples` conversation ids and counts in `trend_buckets` equal slices of
        the scope's first..last failure), most frequent first (ties by signature)."""
        where, args = self._where(scope)
        total = 0
        counts: list[ModeCounts] = []
        for signature, n, first, last in conn.execute(
            "SELECT signature, count(*), min(closed_at), max(closed_at) "
            f"FROM result_failure_modes WHERE 1{where} GROUP BY signature",
            args,
        ):
            if signature == MARKER:
                total = int(n)
            else:
                counts.append(ModeCounts(str(signature), int(n), float(first), float(last)))
        counts.sort(key=lambda m: (-m.count, m.signature))
        top = counts[:limit]
        if not top:
            return total, []
        lo = min(m.first_seen for m in counts)
        hi = max(m.last_seen for m in counts)
        width = max((hi - lo) / trend_buckets, 1e-3)
        by_signature = {m.signature: m for m in top}
        for m in top:
            m.trend = [0] * trend_buckets
            m.examples = [
                str(k)
                for (k,) in conn.execute(
                    "SELECT conv_key FROM result_failure_modes WHERE signature = ?"
                    f"{where} ORDER BY closed_at DESC, conv_key DESC LIMIT ?",
                    (m.signature, *args, examples),
                )
            ]
        marks = ",".join("?" * len(top))
        for signature, bucket, n in conn.execute(
            f"SELECT signature, min(CAST((closed_at - ?) / ? AS INTEGER), {trend_buckets - 1}) "
            f"AS b, count(*) FROM result_failure_modes WHERE signature IN ({marks}){where} "
            "GROUP BY signature, b",
            (lo, width, *by_signature, *args),
        ):
            by_signature[str(signature)].trend[int(bucket)] = int(n)
        return total, top

    @staticmethod
    def signatures_of_version(conn: sqlite3.Connection, scope: ModeScope) -> set[str]:
        """The signatures seen in `scope` (any time): what `new` compares against."""
        where, args = FailureModeIndex._where(
            ModeScope(scope.agent_name, scope.agent_version, scope.reference_set)
        )
        return {
            str(s)
            for (s,) in conn.execute(
                f"SELECT DISTINCT signature FROM result_failure_modes WHERE signature != ''{where}",
                args,
            )
        }

    @staticmethod
    def previous_version(conn: sqlite3.Connection, agent: str | None, version: str) -> str | None:
        """The version of `agent` first seen failing just before `version` (None: none)."""
        row = conn.execute(
            "SELECT agent_version FROM failure_mode_versions WHERE agent_name = ? "
            "AND first_seen < (SELECT first_seen FROM failure_mode_versions "
            "WHERE agent_name = ? AND agent_version = ?) ORDER BY first_seen DESC LIMIT 1",
            (agent or "", agent or "", version),
        ).fetchone()
        return None if row is None else str(row[0])

    @staticmethod
    def versions(conn: sqlite3.Connection, agent: str | None = None) -> list[tuple[str, str]]:
        """(agent, version) pairs with failures, newest first."""
        sql = "SELECT agent_name, agent_version FROM failure_mode_versions"
        args: tuple[Any, ...] = ()
        if agent is not None:
            sql += " WHERE agent_name = ?"
            args = (agent,)
        return [(str(a), str(v)) for a, v in conn.execute(sql + " ORDER BY first_seen DESC", args)]
