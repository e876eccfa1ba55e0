"""Reference-candidate decisions in the PostgreSQL results store (`state.results_url`):
which candidates people approved or rejected, so every replica's candidate list hides
them, whichever replica the person used (the candidates themselves are mined from the
shared results: `api/candidates.py`).

One row per decided candidate (people decide tens, not millions). Reads run with the
candidates' refresh, off the event loop; a write is one upsert, off the loop too; a
database that cannot be reached raises `ResultsUnavailable` (a `LookupError`).
"""

from __future__ import annotations

import time
from typing import Any, Protocol

__all__ = ["CANDIDATES_PG_SCHEMA", "PostgresCandidateDecisions"]

CANDIDATES_PG_SCHEMA = """
CREATE TABLE IF NOT EXISTS candidate_decisions (
    candidate_id TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    decided_at DOUBLE PRECISION NOT NULL
);
"""


class _Pool(Protocol):
    """What this needs of `PostgresResults`."""

    def reading(self) -> Any: ...

    def writing(self) -> Any: ...


class PostgresCandidateDecisions:
    """`CandidateDecisions` (api/candidates.py) over the shared database."""

    def __init__(self, pool: _Pool) -> None:
        self.pool = pool

    def decided(self) -> dict[str, str]:
        """candidate id → "approved" or "rejected"."""
        with self.pool.reading() as conn:
            rows = conn.execute("SELECT candidate_id, state FROM candidate_decisions").fetchall()
        return {str(k): str(v) for k, v in rows}

    def decide(self, candidate_id: str, state: str) -> None:
        """Record a decision (a later one replaces it)."""
        with self.pool.writing() as conn:
            conn.execute(
                "INSERT INTO candidate_decisions (candidate_id, state, decided_at) "
                "VALUES (%s, %s, %s) ON CONFLICT (candidate_id) DO UPDATE SET "
                "state = excluded.state, decided_at = excluded.decided_at",
                (candidate_id, state, time.time()),
            )
