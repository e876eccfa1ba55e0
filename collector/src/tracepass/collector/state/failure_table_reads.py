"""Failure-mode answers read from the state file's tables, for the agent versions the
in-memory counters fold (`failure_index.TRACKED_VERSIONS`: past that many versions, a
new one's failures are counted together with the others folded, issue 33 #15).

The answers have the counters' shape (`ModeCounters.totals`, `.trend`, `.signatures`);
`where`/`args` come from `failure_index.scope_where` (the counters' minute
granularity), so `top_modes` and the API cannot tell where they came from. They scan
`result_failure_modes` (it has no index by version: each costs as much per row as the
table), so they run where reads run, on a reader connection under the API's query
time limit, never on the writer thread.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

__all__ = ["table_failing", "table_firsts", "table_signatures", "table_totals", "table_trend"]


def table_totals(
    conn: sqlite3.Connection, where: str, args: Sequence[Any]
) -> dict[str, tuple[int, float, float]]:
    """signature → (count, first, last) of the rows `where` selects."""
    return {
        str(signature): (int(n), float(first), float(last))
        for signature, n, first, last in conn.execute(
            "SELECT signature, count(*), min(closed_at), max(closed_at) "
            f"FROM result_failure_modes WHERE 1 = 1{where} GROUP BY signature",
            args,
        )
    }


def table_failing(
    conn: sqlite3.Connection, where: str, args: Sequence[Any]
) -> tuple[int, float, float] | None:
    """(count, first, last) of the failing conversations `where` selects (the results
    whose summary lists failure modes), None when there are none."""
    n, first, last = conn.execute(
        "SELECT count(*), min(closed_at), max(closed_at) FROM results "
        f"""WHERE summary LIKE '%"modes"%'{where}""",
        args,
    ).fetchone()
    return (int(n), float(first), float(last)) if n else None


def table_trend(
    conn: sqlite3.Connection, signature: str, width: float, where: str, args: Sequence[Any]
) -> list[tuple[float, int]]:
    """(start, count) of `signature` per `width` seconds among the rows `where` selects."""
    return [
        (int(slot) * width, int(n))
        for slot, n in conn.execute(
            "SELECT CAST(closed_at / ? AS INTEGER), count(*) FROM result_failure_modes "
            f"WHERE signature = ?{where} GROUP BY 1",
            (width, signature, *args),
        )
    ]


def table_signatures(conn: sqlite3.Connection, where: str, args: Sequence[Any]) -> set[str]:
    """Signatures stored among the rows `where` selects."""
    return {
        str(s)
        for (s,) in conn.execute(
            f"SELECT DISTINCT signature FROM result_failure_modes WHERE 1 = 1{where}", args
        )
    }


def table_firsts(conn: sqlite3.Connection, agent: str) -> dict[str, float]:
    """Version → its first result, of every version of `agent` ('' for a missing name)."""
    return {
        str(version): float(first)
        for version, first in conn.execute(
            "SELECT coalesce(agent_version, ''), min(closed_at) FROM results "
            "WHERE outcome IS NOT NULL AND coalesce(agent_name, '') = ? GROUP BY 1",
            (agent,),
        )
    }
