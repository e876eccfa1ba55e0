"""The read model's pass@k counts over stored results, written once for both results
stores: plain SQL with `?` placeholders that SQLite runs as it is and PostgreSQL
through `postgres._QmarkConnection` (like the list query, `index.list_results`).

Trials are what pass@k counts: pass, fail and incomplete results that matched a
reference (error and unscored are no evidence either way).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

__all__ = ["AgentCountRow", "Queryable", "agent_counts", "reference_counts"]

# (agent name, agent version, reference set, reference id, trials, passes)
AgentCountRow = tuple[str | None, str | None, str | None, str, int, int]

_TRIAL = "closed_at >= ? AND reference_id IS NOT NULL AND outcome IN ('pass','fail','incomplete')"
# Portable: SQLite would sum a boolean, PostgreSQL will not.
_PASSES = "sum(CASE WHEN outcome = 'pass' THEN 1 ELSE 0 END)"


class Queryable(Protocol):
    """A connection these queries run on (sqlite3's, or PostgreSQL's `?` adapter)."""

    def execute(self, sql: str, args: Sequence[Any] = ..., /) -> Iterable[Sequence[Any]]: ...


def reference_counts(
    conn: Queryable,
    since: float,
    *,
    agent_name: str | None = None,
    agent_version: str | None = None,
    reference_set: str | None = None,
) -> dict[str, tuple[int, int]]:
    """reference id → (trials, passes) of results completed since `since` (None
    filters: any)."""
    sql = f"SELECT reference_id, count(*), {_PASSES} FROM results WHERE {_TRIAL}"
    args: list[Any] = [since]
    for column, value in (
        ("agent_name", agent_name),
        ("agent_version", agent_version),
        ("reference_set", reference_set),
    ):
        if value is not None:
            sql += f" AND {column} = ?"
            args.append(value)
    rows = conn.execute(sql + " GROUP BY reference_id", args)
    return {str(ref): (int(n), int(c or 0)) for ref, n, c in rows}


def agent_counts(conn: Queryable, since: float) -> list[AgentCountRow]:
    """Trials and passes per agent × version × reference set × reference of the
    results completed since `since` (pooled pass@k: `api/pooled.py`)."""
    rows = conn.execute(
        f"SELECT agent_name, agent_version, reference_set, reference_id, count(*), {_PASSES} "
        f"FROM results WHERE {_TRIAL} "
        "GROUP BY agent_name, agent_version, reference_set, reference_id",
        (since,),
    )
    return [(a, v, s, str(r), int(n), int(c or 0)) for a, v, s, r, n, c in rows]
