"""The failure-mode index: one row per (failing conversation, failure signature), kept
in the same transaction as the result, plus per-minute counts of those rows kept in
memory, so "the top failure modes of v1.1" sums a few hundred counters instead of
scanning rows or decoding stored results.

The counters also count failing conversations, under the empty signature (`MARKER`:
the denominator of a mode's share). That count has no rows of its own: at open it is
read from the results whose summary lists failure modes (`index.py` writes them there).

The counters (`ModeCounters`: scope → signature → minute → count, first, last) are
built from the tables when the state file opens (grouped scans) and updated after
each commit that wrote or deleted rows (never inside the transaction: the writer may run
an op twice). `since`/`until` therefore apply at minute granularity; counts are exact
for whole minutes, first/last seen exact except after a re-evaluation removed a row
(then they may be a few seconds wide of the truth, within that minute).

Bounds: at most `max_per_version` distinct signatures per agent version; a result's
signatures beyond that are stored as `other` (the set per version is kept in memory by
the writer thread, loaded from the table on first use). The signatures themselves are
bounded by `failure_signatures.bound`.
"""

from __future__ import annotations

import json
import math
import sqlite3
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tracepass.collector.state.codec import StoredResult
from tracepass.collector.state.failure_table_reads import (
    table_failing,
    table_firsts,
    table_signatures,
    table_totals,
    table_trend,
)
from tracepass.evaluator.bounded_cache import BoundedCache
from tracepass.evaluator.scoring.explain import failure_analysis
from tracepass.evaluator.scoring.failure_signatures import OTHER, is_failing

__all__ = [
    "FAILURE_INDEX_SCHEMA",
    "HOUR",
    "MARKER",
    "MINUTE",
    "TRACKED_VERSIONS",
    "VERSION_CACHE_BYTES",
    "VERSION_CACHE_ENTRIES",
    "FailureModeIndex",
    "ModeCounters",
    "ModeCounts",
    "ModeScope",
    "Row",
    "known_signatures_cache",
    "scope_where",
    "stored_signatures",
    "top_modes",
    "version_before",
]

MARKER = ""  # the counters' key for "failing conversations" (never a stored row)
MINUTE = 60.0  # the counters' time granularity (seconds)
HOUR = 3600.0  # the trend's granularity over a whole range
# Agent versions come from spans: each one the counters keep costs ~3.5 KB for good
# (issue 33: ~4 KB per new failing version). Like the label limits bound series, the
# counters keep the first TRACKED_VERSIONS (agent, version) pairs apart; the failures of
# later ones are counted together per agent and reference set under FOLDED (so totals
# over every version stay exact), and a query naming such a version reads the table.
TRACKED_VERSIONS = 1024
FOLDED = "\x00folded"  # the version of the folded counters (never a real one: no NUL)
# The per-version signature caches (`known_signatures_cache`): versions and estimated
# bytes (each set holds at most `max_per_version` bounded signatures).
VERSION_CACHE_ENTRIES = 1024
VERSION_CACHE_BYTES = 16 * 1024 * 1024
# (signature, closed_at, agent_name, agent_version, reference_set) of one stored row.
Row = tuple[str, float, str | None, str | None, str | None]
Scope = tuple[str, str, str]  # (agent, version, reference set); None stored as ""
FAILURE_INDEX_SCHEMA = """
CREATE TABLE IF NOT EXISTS result_failure_modes (
    signature TEXT NOT NULL,
    conv_key TEXT NOT NULL,
    closed_at REAL NOT NULL,
    agent_name TEXT,
    agent_version TEXT,
    reference_set TEXT,
    outcome TEXT,
    PRIMARY KEY (signature, closed_at, conv_key)
) WITHOUT ROWID;
"""
# Only the primary key's b-tree: each secondary index cost about as much per stored
# row as the table itself. A key's rows are found from its results row (`PRIOR`: its
# closed_at and the signatures in its summary), scopes from the counters.
PRIOR = "SELECT closed_at, summary FROM results WHERE conv_key=?"
# The same for a batch of keys (one statement instead of one per stored result).
_PRIORS = "SELECT conv_key, closed_at, summary FROM results WHERE conv_key IN ({})"
_PRIORS_CHUNK = 500  # keys per statement (well under SQLite's variable limit)
# The table is clustered by (signature, closed_at, conv_key): the `failure_mode=` list
# filter pages through it in completion order without an index of its own. A key's
# rows are deleted before new ones are written, so (signature, conv_key) stays unique.
_INSERT = "INSERT OR IGNORE INTO result_failure_modes VALUES (?,?,?,?,?,?,?)"
_REPLACE = (
    "DELETE FROM result_failure_modes WHERE signature=? AND closed_at=? AND conv_key=? "
    "RETURNING signature, closed_at, agent_name, agent_version, reference_set"
)


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


class ModeCounters:
    """scope → signature → [count, first seen, last seen, {minute: count}], and the
    first failure of each (agent, version); guarded by a lock (updated on the event
    loop after commits, read by queries). Whole-range questions read the per-signature
    totals; only a time range or a trend walks the minutes."""

    def __init__(self, tracked_versions: int = TRACKED_VERSIONS) -> None:
        self._lock = threading.Lock()
        self._by_scope: dict[Scope, dict[str, list[Any]]] = {}
        self._first: dict[tuple[str, str], float] = {}
        self.tracked_versions = tracked_versions
        # Versions counted under FOLDED (each once while `_folded_seen`, itself capped at
        # `tracked_versions`, remembers it: past that a version may count twice).
        self.folded_versions = 0
        self._folded_seen: set[tuple[str, str]] = set()

    def tracked(self, agent: str | None, version: str | None) -> bool:
        """Whether the counters keep (agent, version) apart (else it is folded)."""
        return (agent or "", version or "") in self._first

    def _scope(self, agent: str | None, version: str | None, rset: str | None) -> Scope:
        """The counters' scope of a row: its own, or its agent's FOLDED one (under the
        lock; a new version is tracked while there is room)."""
        key = (agent or "", version or "")
        if key not in self._first:
            if len(self._first) < self.tracked_versions:
                self._first[key] = math.inf
            else:
                self._note_folded(key)
                return (key[0], FOLDED, rset or "")
        return (key[0], key[1], rset or "")

    def _note_folded(self, key: tuple[str, str]) -> None:
        if key not in self._folded_seen:
            self.folded_versions += 1
            if len(self._folded_seen) < self.tracked_versions:
                self._folded_seen.add(key)

    def _add_one(self, signature: str, at: float, scope: Scope, n: int, last: float) -> None:
        modes = self._by_scope.setdefault(scope, {})
        cell = modes.get(signature)
        if cell is None:
            cell = modes[signature] = [0, at, last, {}, {}]
        cell[0] += n
        cell[1] = min(cell[1], at)
        cell[2] = max(cell[2], last)
        minutes: dict[int, int] = cell[3]
        minute = int(at // MINUTE)
        minutes[minute] = minutes.get(minute, 0) + n
        hours: dict[int, int] = cell[4]
        hour = int(at // HOUR)
        hours[hour] = hours.get(hour, 0) + n
        if scope[1] != FOLDED:
            version = (scope[0], scope[1])
            self._first[version] = min(self._first.get(version, math.inf), at)

    def add(self, rows: Iterable[Row], sign: int = 1) -> None:
        with self._lock:
            for signature, at, agent, version, rset in rows:
                scope = self._scope(agent, version, rset)
                if sign > 0:
                    cell = self._by_scope.get(scope, {}).get(signature)
                    if cell is None:
                        self._add_one(signature, at, scope, 1, at)
                        continue
                    # The common case inline: a known mode's counters (no min over
                    # versions, no new cells unless the minute/hour is new).
                    cell[0] += 1
                    if at < cell[1]:
                        cell[1] = at
                        if scope[1] != FOLDED:
                            self._first[(scope[0], scope[1])] = min(
                                self._first[(scope[0], scope[1])], at
                            )
                    if at > cell[2]:
                        cell[2] = at
                    minutes = cell[3]
                    minute = int(at // MINUTE)
                    minutes[minute] = minutes.get(minute, 0) + 1
                    hours = cell[4]
                    hour = int(at // HOUR)
                    hours[hour] = hours.get(hour, 0) + 1
                    continue
                modes = self._by_scope.get(scope, {})
                cell = modes.get(signature)
                if cell is None:
                    continue
                cell[0] -= 1
                for cells, key in ((cell[3], int(at // MINUTE)), (cell[4], int(at // HOUR))):
                    left = cells.get(key, 0) - 1
                    if left > 0:
                        cells[key] = left
                    else:
                        cells.pop(key, None)
                if cell[0] <= 0:
                    del modes[signature]

    def load(self, conn: sqlite3.Connection) -> None:
        """Rebuild from the tables (at open): the modes from their rows, the failing
        conversations from the results that list modes."""
        with self._lock:
            self._by_scope.clear()
            self._first.clear()
            rows = conn.execute(
                "SELECT agent_name, agent_version, reference_set, signature, "
                "count(*), min(closed_at), max(closed_at) "
                "FROM result_failure_modes GROUP BY 1, 2, 3, 4, CAST(closed_at / ? AS INTEGER)",
                (MINUTE,),
            ).fetchall()
            rows += conn.execute(
                "SELECT agent_name, agent_version, reference_set, '', "
                "count(*), min(closed_at), max(closed_at) FROM results "
                """WHERE summary LIKE '%"modes"%' GROUP BY 1, 2, 3, CAST(closed_at / ? AS INTEGER)""",
                (MINUTE,),
            ).fetchall()
            self.folded_versions = 0
            self._folded_seen.clear()
            # The versions kept apart: the first seen, as when they arrived.
            for agent, version, first in conn.execute(
                "SELECT agent_name, agent_version, min(closed_at) AS first FROM results "
                "WHERE outcome IS NOT NULL GROUP BY 1, 2 ORDER BY first"
            ):
                key = (agent or "", version or "")
                if key in self._first or len(self._first) < self.tracked_versions:
                    self._first[key] = min(self._first.get(key, math.inf), float(first))
                else:
                    self._note_folded(key)
            for agent, version, rset, signature, n, first, last in rows:
                scope = self._scope(agent, version, rset)
                self._add_one(str(signature), float(first), scope, int(n), float(last))

    def _scopes(self, scope: ModeScope) -> list[dict[str, list[Any]]]:
        return [
            modes
            for (agent, version, rset), modes in self._by_scope.items()
            if (scope.agent_name is None or agent == scope.agent_name)
            and (scope.agent_version is None or version == scope.agent_version)
            and (scope.reference_set is None or rset == scope.reference_set)
        ]

    @staticmethod
    def _minute_range(scope: ModeScope) -> tuple[float, float]:
        lo = -math.inf if scope.since is None else math.floor(scope.since / MINUTE)
        hi = math.inf if scope.until is None else math.ceil(scope.until / MINUTE)
        return lo, hi

    def totals(self, scope: ModeScope) -> dict[str, tuple[int, float, float]]:
        """signature → (count, first, last) in `scope`, the marker included.
        `since`/`until` select whole minutes (those starting at or after since's
        minute, before until's); then first/last are those minutes' bounds."""
        timed = scope.since is not None or scope.until is not None
        lo, hi = self._minute_range(scope)
        out: dict[str, list[Any]] = {}
        with self._lock:
            for modes in self._scopes(scope):
                for signature, (n, first, last, minutes, _) in modes.items():
                    if timed:
                        inside = [m for m in minutes if lo <= m < hi]
                        if not inside:
                            continue
                        n = sum(minutes[m] for m in inside)
                        first = max(first, min(inside) * MINUTE)
                        last = min(last, (max(inside) + 1) * MINUTE)
                    acc = out.get(signature)
                    if acc is None:
                        out[signature] = [n, first, last]
                    else:
                        acc[0] += n
                        acc[1] = min(acc[1], first)
                        acc[2] = max(acc[2], last)
        return {k: (int(v[0]), float(v[1]), float(v[2])) for k, v in out.items() if v[0] > 0}

    def trend(self, scope: ModeScope, signature: str) -> list[tuple[float, int]]:
        """(start, count) of `signature` in `scope`: per minute within a time range,
        per hour over the whole range."""
        timed = scope.since is not None or scope.until is not None
        lo, hi = self._minute_range(scope)
        out: list[tuple[float, int]] = []
        with self._lock:
            for modes in self._scopes(scope):
                cell = modes.get(signature)
                if cell is None:
                    continue
                if timed:
                    out.extend((m * MINUTE, n) for m, n in cell[3].items() if lo <= m < hi)
                else:
                    out.extend((h * HOUR, n) for h, n in cell[4].items())
        return out

    def signatures(self, scope: ModeScope) -> set[str]:
        """Signatures ever seen in `scope` (time ignored), the marker left out."""
        whole = ModeScope(scope.agent_name, scope.agent_version, scope.reference_set)
        with self._lock:
            return {s for modes in self._scopes(whole) for s in modes if s}

    def signatures_exact(self, agent: str, version: str) -> set[str]:
        """Signatures of the scopes whose agent and version are exactly these."""
        with self._lock:
            return {
                s
                for (a, v, _), modes in self._by_scope.items()
                if a == agent and v == version
                for s in modes
                if s
            }

    def note_version(self, agent: str | None, version: str | None, at: float) -> None:
        """A result of (agent, version) completed at `at`, failing or not: versions are
        ordered by their first result, so a version without failures is still the
        baseline of the next one."""
        key = (agent or "", version or "")
        first = self._first.get(key)
        if first is None or at < first:
            with self._lock:
                if key in self._first or len(self._first) < self.tracked_versions:
                    self._first[key] = min(self._first.get(key, math.inf), at)
                else:
                    self._note_folded(key)

    def first_seen(self) -> dict[tuple[str, str], float]:
        """(agent, version) → earliest result (failing or not) counted."""
        with self._lock:
            return {k: t for k, t in self._first.items() if t != math.inf}


def known_signatures_cache() -> BoundedCache[tuple[str, str], set[str]]:
    """A per-version signature cache of the failure-mode indexes (both stores)."""
    return BoundedCache(
        "failure_mode_versions", max_entries=VERSION_CACHE_ENTRIES, max_bytes=VERSION_CACHE_BYTES
    )


def scope_where(scope: ModeScope, *, times: bool = True, mark: str = "?") -> tuple[str, list[Any]]:
    """` AND …` conditions selecting `scope`'s rows (`times`: its range, at whole
    minutes as the counters read it) and their arguments; `mark`: the placeholder
    (PostgreSQL's `%s`)."""
    clauses: list[str] = []
    args: list[Any] = []
    for column in ("agent_name", "agent_version", "reference_set"):
        value = getattr(scope, column)
        if value is not None:
            clauses.append(f"{column} = {mark}")
            args.append(value)
    if times and scope.since is not None:
        clauses.append(f"closed_at >= {mark}")
        args.append(math.floor(scope.since / MINUTE) * MINUTE)
    if times and scope.until is not None:
        clauses.append(f"closed_at < {mark}")
        args.append(math.ceil(scope.until / MINUTE) * MINUTE)
    return "".join(f" AND {c}" for c in clauses), args


def version_before(firsts: dict[str, float], version: str) -> str | None:
    """Of one agent's versions (version → its first result), the one first seen just
    before `version` (None: `version` is unknown or the first)."""
    mine = firsts.get(version)
    if mine is None:
        return None
    earlier = [(t, v) for v, t in firsts.items() if t < mine]
    return max(earlier)[1] if earlier else None


def top_modes(
    totals: dict[str, tuple[int, float, float]],
    *,
    limit: int,
    trend: Callable[[list[str]], dict[str, list[tuple[float, int]]]],
    examples: Callable[[ModeCounts], list[str]],
    trend_buckets: int = 8,
) -> tuple[int, list[ModeCounts]]:
    """The failure-modes answer from a scope's counter `totals` (signature → count,
    first, last; the failing conversations under `MARKER`), whichever store counted
    them: (failing conversations, the `limit` most frequent modes, ties by signature),
    each with its `trend` ((start, count) per counter cell, put into `trend_buckets`
    equal slices of the scope's first..last failure) and `examples`."""
    totals = dict(totals)
    marker = totals.pop(MARKER, None)
    total = marker[0] if marker is not None else 0
    counts = sorted(
        (ModeCounts(s, n, first, last) for s, (n, first, last) in totals.items()),
        key=lambda m: (-m.count, m.signature),
    )
    top = counts[:limit]
    if not top:
        return total, []
    lo = min(m.first_seen for m in counts)
    hi = max(m.last_seen for m in counts)
    width = max((hi - lo) / trend_buckets, 1e-3)
    cells = trend([m.signature for m in top])
    for m in top:
        m.trend = [0] * trend_buckets
        for start, n in cells.get(m.signature, ()):
            at = max(start, lo)
            m.trend[min(int((at - lo) / width), trend_buckets - 1)] += n
        m.examples = examples(m)
    return total, top


class FailureModeIndex:
    """Writes (writer thread), counters (event loop) and reads of the failure modes."""

    def __init__(self, max_per_version: int = 200) -> None:
        self.max_per_version = max_per_version
        self.counters = ModeCounters()
        # (agent, version) → signatures stored for it (writer thread only): a cache of
        # the counters (a version that left it is read back on its next result).
        self._known: BoundedCache[tuple[str, str], set[str]] = known_signatures_cache()
        self._reader: sqlite3.Connection | None = None

    def load(self, conn: sqlite3.Connection) -> None:
        """Rebuild the counters from the tables; `conn` (the state file's reader) is
        where `top_modes` reads examples."""
        self.counters.load(conn)
        self._reader = conn

    # ------------------------------------------------------------------ writing

    def write(
        self,
        conn: sqlite3.Connection,
        key: str,
        stored: StoredResult,
        signatures: Sequence[str],
        closed_at: float,
        prior: Sequence[Any] | None = None,
    ) -> tuple[list[Row], list[Row]]:
        """Replace the rows of `key` by `signatures` (inside the writer's transaction);
        `prior`: the (closed_at, summary) of its results row before this write (`PRIOR`;
        None: it had none). Returns (rows removed, rows added) for `counters` once the
        commit succeeded."""
        inserts: list[tuple[Any, ...]] = []
        change = self.replace_rows(conn, key, stored, signatures, closed_at, prior, inserts)
        self.insert(conn, inserts)
        return change

    @staticmethod
    def insert(conn: sqlite3.Connection, inserts: Sequence[tuple[Any, ...]]) -> None:
        """Insert the rows `replace_rows` collected (one statement for a batch)."""
        if inserts:
            conn.executemany(_INSERT, inserts)

    @staticmethod
    def priors(conn: sqlite3.Connection, keys: Sequence[str]) -> dict[str, tuple[Any, Any]]:
        """`PRIOR` of several keys at once: key → (closed_at, summary) of the keys that
        have a results row."""
        found: dict[str, tuple[Any, Any]] = {}
        for i in range(0, len(keys), _PRIORS_CHUNK):
            chunk = keys[i : i + _PRIORS_CHUNK]
            sql = _PRIORS.format(",".join("?" * len(chunk)))
            for key, closed_at, summary in conn.execute(sql, chunk):
                found[key] = (closed_at, summary)
        return found

    def replace_rows(
        self,
        conn: sqlite3.Connection,
        key: str,
        stored: StoredResult,
        signatures: Sequence[str],
        closed_at: float,
        prior: Sequence[Any] | None,
        inserts: list[tuple[Any, ...]],
    ) -> tuple[list[Row], list[Row]]:
        """`write` with the new rows appended to `inserts` instead of inserted (`insert`
        them: a batch's rows with one statement)."""
        removed: list[Row] = []
        if prior is not None:
            removed = self._remove(conn, key, prior)
        result = stored.result
        if not signatures or result is None:
            return removed, []
        conv = stored.conversation
        agent = result.agent_name if result.agent_name is not None else conv.agent_name
        version = result.agent_version if result.agent_version is not None else conv.agent_version
        known = self._known.get((agent or "", version or ""))
        if known is None:
            known = self._known_of(conn, agent or "", version or "")
        rset = result.reference_set
        added: list[Row] = [(MARKER, closed_at, agent, version, rset)]
        kept = {MARKER}
        for signature in signatures:
            if signature not in known:
                if len(known) >= self.max_per_version:
                    signature = OTHER  # never counts against the bound
                else:
                    known.add(signature)
            if signature not in kept:
                kept.add(signature)
                added.append((signature, closed_at, agent, version, rset))
        outcome = result.outcome.value
        inserts.extend((r[0], key, closed_at, agent, version, rset, outcome) for r in added[1:])
        return removed, added

    @staticmethod
    def _remove(conn: sqlite3.Connection, key: str, prior: Sequence[Any]) -> list[Row]:
        closed_at, summary = prior
        try:
            modes = json.loads(summary).get("modes") if summary else None
        except ValueError:
            modes = None
        if not modes:
            return []
        removed: list[Row] = []
        for signature in {OTHER, *modes}:
            removed.extend(conn.execute(_REPLACE, (signature, closed_at, key)).fetchall())
        if removed:  # the failing conversation itself, counted under MARKER
            _, at, agent, version, rset = removed[0]
            removed.append((MARKER, at, agent, version, rset))
        return removed

    def _known_of(self, conn: sqlite3.Connection, agent: str, version: str) -> set[str]:
        """The signatures stored for a version, from the counters (once per version)."""
        known = self._known.get((agent, version))
        if known is None:
            known = self.counters.signatures(ModeScope(agent or None, version or None))
            if not agent or not version:
                # The counters say "" for a missing name; a None filter means "any".
                known = self.counters.signatures_exact(agent, version)
            known.discard(OTHER)  # never counts against the bound
            self._known.put((agent, version), known)
        return known

    def applied(
        self,
        change: tuple[list[Row], list[Row]],
        agent: str | None = None,
        version: str | None = None,
        closed_at: float | None = None,
    ) -> None:
        """Count a committed `write`'s rows (on the event loop, after the commit), and
        note the result's version (`closed_at` given: every stored result)."""
        if closed_at is not None:
            self.counters.note_version(agent, version, closed_at)
        removed, added = change
        if removed:
            self.counters.add(removed, -1)
        if added:
            self.counters.add(added)

    def applied_many(
        self,
        items: Iterable[tuple[tuple[list[Row], list[Row]], str | None, str | None, float]],
    ) -> None:
        """`applied` of a committed batch: (change, agent, version, closed_at) each; the
        versions are noted once per (agent, version), with their earliest closed_at."""
        firsts: dict[tuple[str | None, str | None], float] = {}
        for (removed, added), agent, version, closed_at in items:
            if removed:
                self.counters.add(removed, -1)
            if added:
                self.counters.add(added)
            version_key = (agent, version)
            first = firsts.get(version_key)
            if first is None or closed_at < first:
                firsts[version_key] = closed_at
        for (agent, version), closed_at in firsts.items():
            self.counters.note_version(agent, version, closed_at)

    def delete(self, conn: sqlite3.Connection, where_sql: str, args: Sequence[Any]) -> list[Row]:
        """Delete the rows of the results `where_sql` selects (a WHERE clause over
        `results`, run before those rows go); returns them (subtract them from
        `counters` once committed)."""
        gone: list[Row] = []
        for key, closed_at, summary in conn.execute(
            f"SELECT conv_key, closed_at, summary FROM results WHERE {where_sql} "
            "AND summary LIKE '%\"modes\"%'",
            args,
        ).fetchall():
            gone.extend(self._remove(conn, key, (closed_at, summary)))
        return gone

    # ------------------------------------------------------------------ reading

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
        where, args = scope_where(scope)

        def latest(m: ModeCounts) -> list[str]:
            # Latest first, read backwards from the mode's last row in scope.
            return [
                str(k)
                for (k,) in conn.execute(
                    "SELECT conv_key FROM result_failure_modes WHERE signature = ? "
                    f"AND closed_at <= ?{where} ORDER BY closed_at DESC, conv_key DESC LIMIT ?",
                    (m.signature, m.last_seen, *args, examples),
                )
            ]

        if self._folded(scope):  # the counters do not keep this version apart
            totals = table_totals(conn, where, args)
            failing = table_failing(conn, where, args)
            if failing is not None:
                totals[MARKER] = failing
            width = MINUTE if scope.since is not None or scope.until is not None else HOUR

            def trend(signatures: list[str]) -> dict[str, list[tuple[float, int]]]:
                return {s: table_trend(conn, s, width, where, args) for s in signatures}

        else:
            totals = self.counters.totals(scope)

            def trend(signatures: list[str]) -> dict[str, list[tuple[float, int]]]:
                return {s: self.counters.trend(scope, s) for s in signatures}

        return top_modes(
            totals, limit=limit, trend=trend, examples=latest, trend_buckets=trend_buckets
        )

    def _folded(self, scope: ModeScope) -> bool:
        """Whether `scope` names a version the counters may have folded."""
        if scope.agent_version is None or not self.counters.folded_versions:
            return False
        return scope.agent_name is None or not self.counters.tracked(
            scope.agent_name, scope.agent_version
        )

    def top_modes(self, scope: ModeScope, *, limit: int) -> tuple[int, list[ModeCounts]]:
        """`modes` on the state file's reader connection (`FailureModeQueries`)."""
        if self._reader is None:
            raise LookupError("the failure-mode index is not open")
        return self.modes(self._reader, scope, limit=limit)

    def signatures_of_version(self, scope: ModeScope) -> set[str]:
        """The signatures seen in `scope` (any time): what `new` compares against."""
        if self._folded(scope) and self._reader is not None:
            where, args = scope_where(scope, times=False)
            return table_signatures(self._reader, where, args)
        return self.counters.signatures(scope)

    def previous_version(self, agent: str | None, version: str) -> str | None:
        """The version of `agent` first seen just before `version` (None: none; read
        from the results when `version` may be folded)."""
        if self._reader is not None and self._folded(ModeScope(agent, version)):
            return version_before(table_firsts(self._reader, agent or ""), version)
        firsts = {v: t for (a, v), t in self.counters.first_seen().items() if a == (agent or "")}
        return version_before(firsts, version)

    def versions(self, agent: str | None = None) -> list[tuple[str, str]]:
        """(agent, version) pairs with stored results, newest first (the tracked ones:
        the first `TRACKED_VERSIONS`)."""
        firsts = self.counters.first_seen()
        pairs = [p for p in firsts if agent is None or p[0] == agent]
        return sorted(pairs, key=lambda p: firsts[p], reverse=True)
