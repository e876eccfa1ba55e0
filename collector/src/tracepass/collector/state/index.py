"""The searchable columns of stored results and the list query over them.

The `results` table keeps each evaluation as data (`codec.py`); listing "the failing
conversations of agent X version 1.1 in the last hour" must not decode 100k of those,
so the fields a list filters or shows are copied into columns (indexed) and a small
JSON `summary` (reasons, trace ids) when the result is written. Policy violation rules
go to `result_violations` (one row per rule), so `violation=` is an index lookup too.

`backfill` fills the columns of rows written by schema version 2 (the upgrade path):
it decodes each stored result once, at open.
"""

from __future__ import annotations

import base64
import heapq
import itertools
import json
import logging
import math
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tracepass.collector.state.codec import StoredResult, decode_result
from tracepass.collector.state.reference_tools import sqlite_tools
from tracepass.evaluator.models import ConversationResult, Outcome
from tracepass.evaluator.scoring.explain import failed_turns, failure_analysis, violation_rules
from tracepass.evaluator.scoring.failure_signatures import is_failing

__all__ = [
    "FILTER_INDEXES",
    "INDEX_COLUMNS",
    "INDEX_SCHEMA",
    "ResultFilter",
    "ResultRow",
    "backfill",
    "decode_cursor",
    "encode_cursor",
    "index_values",
    "list_results",
    "version_costs",
    "violation_rows",
    "write_violations",
]

log = logging.getLogger(__name__)

# (name, SQL declaration) added to `results` by schema version 3.
INDEX_COLUMNS: tuple[tuple[str, str], ...] = (
    ("agent_name", "TEXT"),
    ("agent_version", "TEXT"),
    ("reference_set", "TEXT"),
    ("reference_id", "TEXT"),
    ("outcome", "TEXT"),
    ("turns", "INTEGER NOT NULL DEFAULT 0"),
    ("failed_turns", "INTEGER NOT NULL DEFAULT 0"),
    ("summary", "TEXT"),
    # Added later (added to existing files at open, NULL for rows stored before):
    # the conversation's cost and wall latency, for `min_cost_usd` / `min_duration_s`.
    ("cost_usd", "REAL"),
    ("duration_s", "REAL"),
)

# Every index ends in (closed_at, conv_key): a page is then an ordered index range read
# from the newest end, never a sort of everything that matches.
INDEX_SCHEMA = """
CREATE INDEX IF NOT EXISTS results_recent ON results (closed_at, conv_key);
CREATE INDEX IF NOT EXISTS results_outcome ON results (outcome, closed_at, conv_key);
CREATE INDEX IF NOT EXISTS results_agent
    ON results (agent_name, agent_version, outcome, closed_at, conv_key);
CREATE INDEX IF NOT EXISTS results_cost ON results (cost_usd, closed_at, conv_key);
CREATE INDEX IF NOT EXISTS results_duration ON results (duration_s, closed_at, conv_key);
CREATE TABLE IF NOT EXISTS result_violations (
    rule TEXT NOT NULL,
    conv_key TEXT NOT NULL,
    closed_at REAL NOT NULL,
    outcome TEXT,
    PRIMARY KEY (rule, conv_key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS result_violations_recent
    ON result_violations (rule, closed_at, conv_key);
CREATE INDEX IF NOT EXISTS result_violations_outcome
    ON result_violations (rule, outcome, closed_at, conv_key);
CREATE INDEX IF NOT EXISTS result_violations_conv ON result_violations (conv_key);
"""
# Every list filter has an index it can page through in order: a filter without one made
# `reference_set=nope` scan every stored result once per outcome (73 s on 100k results,
# issue 21). Created at every open (IF NOT EXISTS), so files of any version get them.
# No more indexes than the list needs: each costs every stored row its insert (issue 36:
# 9 secondary indexes were 27 µs of the writer's 34 per row). `reference_id` alone pages
# through (reference_id, outcome, ...) one outcome at a time like the agent filters, so
# the older (reference_id, closed_at) index is dropped from files that have it.
FILTER_INDEXES = """
DROP INDEX IF EXISTS results_reference;
CREATE INDEX IF NOT EXISTS results_reference_set
    ON results (reference_set, outcome, closed_at, conv_key);
CREATE INDEX IF NOT EXISTS results_reference_outcome
    ON results (reference_id, outcome, closed_at, conv_key);
"""
# One encoder reused: json.dumps with options builds a new encoder per call (once per
# stored result).
_encode_summary = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
# What a row's outcome column can hold: the Outcome values, or NULL (no evaluation).
_ALL_OUTCOMES = ("pass", "fail", "error", "incomplete", "unscored", None)


def index_values(stored: StoredResult, signatures: Sequence[str] = ()) -> tuple[Any, ...]:
    """The INDEX_COLUMNS values of one stored evaluation, in column order;
    `signatures`: its failure signatures if the caller has them already."""
    result = stored.result
    conv = stored.conversation
    summary: dict[str, Any] = {
        "reasons": [] if result is None else _reasons(result, conv.complete),
        "trace_ids": list(conv.trace_ids),
    }
    if signatures:
        summary["modes"] = list(signatures)
    elif result is not None and is_failing(result):
        # Where this result's failure-mode rows are (`failure_index.py`): a later
        # revision deletes them by primary key, without an index on conv_key.
        summary["modes"] = list(failure_analysis(result, conv.complete).signatures)
    text = _encode_summary(summary)
    figures = cost_and_duration(stored)
    if result is None:
        return (
            conv.agent_name,
            conv.agent_version,
            None,
            None,
            None,
            len(conv.turns),
            0,
            text,
            *figures,
        )
    return (
        result.agent_name if result.agent_name is not None else conv.agent_name,
        result.agent_version if result.agent_version is not None else conv.agent_version,
        result.reference_set,
        result.reference_id,
        result.outcome.value,
        len(conv.turns),
        failed_turns(result),
        text,
        *figures,
    )


def cost_and_duration(stored: StoredResult) -> tuple[float | None, float | None]:
    """The conversation's cost (USD) and wall latency (s), None where unknown."""
    conv = stored.conversation
    cost = None if conv.usage is None else conv.usage.cost_usd
    duration = None if conv.latency is None else conv.latency.duration_s
    return cost, duration


def _reasons(result: ConversationResult, complete: bool) -> list[str]:
    """The list's reasons (at most five): the analysis the failure-mode index and the
    failure log share (`explain.failure_analysis`, computed once per result)."""
    if result.outcome == Outcome.PASS:
        return []
    return list(failure_analysis(result, complete).reasons[:5])


def write_violations(
    conn: sqlite3.Connection,
    key: str,
    stored: StoredResult,
    closed_at: float,
    *,
    replacing: bool = True,
) -> None:
    """Replace the violation rows of `key` by those of `stored` (inside the writer's
    transaction, right after the result row). The row's `closed_at` and outcome are
    copied, so a violation filter (with or without outcomes) pages through this table's
    own indexes in completion order. `replacing=False`: the key had no results row
    before this write, so it has no violation rows to delete (they go with it)."""
    if replacing:
        conn.execute("DELETE FROM result_violations WHERE conv_key=?", (key,))
    rows = violation_rows(stored)
    if rows:
        conn.executemany(
            "INSERT OR IGNORE INTO result_violations VALUES (?,?,?,?)",
            [(rule, key, closed_at, outcome) for rule, outcome in rows],
        )


def violation_rows(stored: StoredResult) -> list[tuple[str, str | None]]:
    """(rule, outcome) of every violated rule of one stored evaluation."""
    result = stored.result
    if result is None:
        return []
    return [(rule, result.outcome.value) for rule in violation_rules(result)]


def backfill(conn: sqlite3.Connection, path: object) -> int:
    """Fill the index columns of rows stored before they existed; returns rows done.
    An undecodable row keeps empty columns (listed with outcome null) and is logged."""
    done = 0
    rows = conn.execute(
        "SELECT conv_key, view, closed_at FROM results WHERE summary IS NULL"
    ).fetchall()
    assignments = ", ".join(f"{name}=?" for name, _ in INDEX_COLUMNS)
    tools = sqlite_tools(conn.execute)
    for key, text, closed_at in rows:
        try:
            stored = decode_result(text, tools)
        except (ValueError, TypeError, KeyError) as exc:
            log.error("%s: stored result of %s not indexed: %s", path, key, exc)
            continue
        conn.execute(
            f"UPDATE results SET {assignments} WHERE conv_key=?", (*index_values(stored), key)
        )
        write_violations(conn, key, stored, float(closed_at))
        done += 1
    return done


# ------------------------------------------------------------------------ queries


@dataclass(frozen=True, slots=True)
class ResultFilter:
    """Conditions of a list query (all must hold; None = any). `outcomes` is a set of
    outcome values; `since`/`until` bound the completion time (epoch seconds, until
    exclusive)."""

    outcomes: Sequence[str] = ()
    agent_name: str | None = None
    agent_version: str | None = None
    reference_id: str | None = None
    reference_set: str | None = None
    violation: str | None = None
    failure_mode: str | None = None
    since: float | None = None
    until: float | None = None
    # Conversations costing at least this many USD / lasting at least this many seconds
    # (unknown cost or duration never matches).
    min_cost_usd: float | None = None
    min_duration_s: float | None = None


@dataclass(frozen=True, slots=True)
class ResultRow:
    conversation_id: str
    agent_name: str | None
    agent_version: str | None
    reference_set: str | None
    reference_id: str | None
    outcome: str | None
    revision: int
    completed_at: float
    turns: int
    failed_turns: int
    reasons: list[str] = field(default_factory=list)
    trace_ids: list[str] = field(default_factory=list)
    cost_usd: float | None = None
    duration_s: float | None = None


def version_costs(
    conn: sqlite3.Connection,
    since: float,
    *,
    agent_name: str | None = None,
    reference_set: str | None = None,
) -> dict[tuple[str | None, str | None], tuple[list[float | None], list[float | None]]]:
    """(agent, version) → (costs, durations) of the conversations completed since
    `since` (None filters: any); the reference set's, when given."""
    sql = "SELECT agent_name, agent_version, cost_usd, duration_s FROM results WHERE closed_at >= ?"
    args: list[Any] = [since]
    for column, value in (("agent_name", agent_name), ("reference_set", reference_set)):
        if value is not None:
            sql += f" AND {column}=?"
            args.append(value)
    out: dict[tuple[str | None, str | None], tuple[list[float | None], list[float | None]]] = {}
    for name, version, cost, duration in conn.execute(sql, args):
        costs, durations = out.setdefault((name, version), ([], []))
        costs.append(None if cost is None else float(cost))
        durations.append(None if duration is None else float(duration))
    return out


def encode_cursor(completed_at: float, key: str) -> str:
    raw = json.dumps([completed_at, key], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


# A cursor this server hands out is a timestamp and a conversation key (ids are capped
# well below this): anything longer is refused before it is decoded.
MAX_CURSOR_CHARS = 4096


def decode_cursor(cursor: str) -> tuple[float, str]:
    """Raises ValueError for a cursor this server did not hand out (also a huge number,
    deep nesting or an overlong cursor: a 400, never a 500)."""
    shown = cursor if len(cursor) <= 80 else cursor[:80] + "…"
    if len(cursor) > MAX_CURSOR_CHARS:
        raise ValueError(f"invalid cursor {shown!r} (longer than {MAX_CURSOR_CHARS} characters)")
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        at, key = json.loads(raw)
        if not isinstance(key, str) or isinstance(at, bool) or not isinstance(at, (int, float)):
            raise TypeError(key)
        when = float(at)
        if not math.isfinite(when):
            raise ValueError(at)
        return when, key
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:
        raise ValueError(f"invalid cursor {shown!r}") from exc


_COLUMNS = (
    "r.conv_key, r.agent_name, r.agent_version, r.reference_set, r.reference_id, r.outcome, "
    "r.revision, r.closed_at, r.turns, r.failed_turns, r.summary, r.cost_usd, r.duration_s"
)


def list_results(
    conn: sqlite3.Connection,
    where: ResultFilter,
    *,
    limit: int,
    cursor: tuple[float, str] | None = None,
) -> tuple[list[ResultRow], tuple[float, str] | None]:
    """Rows matching `where`, newest completion first (ties by key), at most `limit`,
    after `cursor`; returns them and the cursor of the next page (None: last page).

    Each outcome is its own ordered index range, so several outcomes (`fail,error`),
    or none with an agent filter, run as one query per outcome whose pages are merged:
    one `outcome IN (...)` query would have to sort everything that matches."""
    outcomes: Sequence[str | None] = where.outcomes
    if not outcomes and any(
        value is not None
        for value in (
            where.agent_name,
            where.agent_version,
            where.reference_set,
            where.reference_id,
        )
    ):
        outcomes = _ALL_OUTCOMES  # their indexes continue with outcome, then time
    if len(outcomes) <= 1:
        rows = _query(conn, where, outcomes[0] if outcomes else None, bool(outcomes), limit, cursor)
    else:
        pages = [_query(conn, where, o, True, limit, cursor) for o in outcomes]
        merged = heapq.merge(
            *pages, key=lambda r: (r.completed_at, r.conversation_id), reverse=True
        )
        rows = list(itertools.islice(merged, limit + 1))
    out = rows[:limit]
    more = len(rows) > limit
    return out, ((out[-1].completed_at, out[-1].conversation_id) if more and out else None)


def _query(
    conn: sqlite3.Connection,
    where: ResultFilter,
    outcome: str | None,
    by_outcome: bool,
    limit: int,
    cursor: tuple[float, str] | None,
) -> list[ResultRow]:
    """One ordered page (limit + 1 rows). With a violation filter the rows are read
    through `result_violations`' (rule, closed_at, conv_key) index."""
    clauses: list[str] = []
    args: list[Any] = []
    if where.failure_mode is not None:
        # Like a violation filter, through the failure-mode rows' own index
        # (`failure_index.py`); a violation filter on top is then an EXISTS probe.
        source = "result_failure_modes f CROSS JOIN results r ON r.conv_key = f.conv_key"
        t, k, o = "f.closed_at", "f.conv_key", "f.outcome"
        clauses.append("f.signature = ?")
        args.append(where.failure_mode)
        if where.violation is not None:
            clauses.append(
                "EXISTS (SELECT 1 FROM result_violations v WHERE v.rule = ? "
                "AND v.conv_key = r.conv_key)"
            )
            args.append(where.violation)
    elif where.violation is not None:
        # Time and order come from the violation rows (a copy of the results' closed_at);
        # CROSS JOIN keeps them the outer loop (SQLite's join-order hint), so the page is
        # read in index order instead of sorting every match of the other filters.
        source = "result_violations v CROSS JOIN results r ON r.conv_key = v.conv_key"
        t, k, o = "v.closed_at", "v.conv_key", "v.outcome"
        clauses.append("v.rule = ?")
        args.append(where.violation)
    else:
        source = "results r"
        t, k, o = "r.closed_at", "r.conv_key", "r.outcome"
    if by_outcome:
        clauses.append(f"{o} IS NULL" if outcome is None else f"{o} = ?")
        if outcome is not None:
            args.append(outcome)
    for column in ("agent_name", "agent_version", "reference_id", "reference_set"):
        value = getattr(where, column)
        if value is not None:
            clauses.append(f"r.{column} = ?")
            args.append(value)
    if where.min_cost_usd is not None:
        clauses.append("r.cost_usd >= ?")
        args.append(where.min_cost_usd)
    if where.min_duration_s is not None:
        clauses.append("r.duration_s >= ?")
        args.append(where.min_duration_s)
    if where.since is not None:
        clauses.append(f"{t} >= ?")
        args.append(where.since)
    if where.until is not None:
        clauses.append(f"{t} < ?")
        args.append(where.until)
    if cursor is not None:
        clauses.append(f"({t} < ? OR ({t} = ? AND {k} < ?))")
        args.extend((cursor[0], cursor[0], cursor[1]))
    sql = f"SELECT {_COLUMNS} FROM {source}"
    if clauses:
        sql += " WHERE " + " AND ".join(clauses)
    sql += f" ORDER BY {t} DESC, {k} DESC LIMIT ?"
    args.append(limit + 1)
    return [_row(r) for r in conn.execute(sql, args)]


def _row(r: Sequence[Any]) -> ResultRow:
    summary: dict[str, Any] = {}
    if r[10]:
        try:
            summary = json.loads(r[10])
        except ValueError:
            summary = {}
    return ResultRow(
        conversation_id=r[0],
        agent_name=r[1],
        agent_version=r[2],
        reference_set=r[3],
        reference_id=r[4],
        outcome=r[5],
        revision=int(r[6]),
        completed_at=float(r[7]),
        turns=int(r[8]),
        failed_turns=int(r[9]),
        reasons=list(summary.get("reasons") or []),
        trace_ids=list(summary.get("trace_ids") or []),
        cost_usd=None if r[11] is None else float(r[11]),
        duration_s=None if r[12] is None else float(r[12]),
    )
