"""The results store: where evaluations are kept and what the read model asks of them.

Two implementations: the local SQLite state file (`StateStore` itself, the default:
results live beside the span buffer) and PostgreSQL (`postgres.py`, `state.results_url`:
several replicas share one database, so any replica's API and UI show all of them).

Writes do not go through this interface: every result is committed to the local state
file first (with the rolling windows' journal entry, in the span buffer's group commit),
which is what makes it survive `kill -9`; with PostgreSQL the state file keeps it in an
outbox until the database has it (`outbox.py`).

To add a field to stored results: put it in the result model (it is stored as data,
`codec.py`); to filter or list by it, add a column to `index.INDEX_COLUMNS` (both
stores create it) and a query method here, implemented in both stores.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterable
from typing import Any, Protocol

from tracepass.collector.state.aggregates import AgentCountRow
from tracepass.collector.state.codec import StoredResult, ToolsByDigest, decode_result
from tracepass.collector.state.failure_index import ModeCounts, ModeScope
from tracepass.collector.state.index import ResultFilter, ResultRow

__all__ = [
    "UNREFERENCED_SQL",
    "AgentCountRow",
    "FailureModeQueries",
    "ResultsStore",
    "TrendRow",
    "decode_unreferenced",
]

log = logging.getLogger(__name__)

# The newest `?` evaluated results that matched no reference (what reference candidates
# are mined from), in one total order so every replica reading one database feeds its
# miner the same rows in the same order.
UNREFERENCED_SQL = (
    "SELECT conv_key, view FROM results WHERE reference_id IS NULL AND outcome IS NOT NULL "
    "ORDER BY closed_at DESC, conv_key DESC LIMIT ?"
)

# (agent name, agent version, slice index, trials, passes)
TrendRow = tuple[str | None, str | None, int, int, int]


def decode_unreferenced(
    rows: Iterable[tuple[Any, Any]], tools: ToolsByDigest
) -> list[StoredResult]:
    """`UNREFERENCED_SQL`'s rows decoded, oldest first; a row that does not decode is
    skipped with a warning naming it (one bad row must not hide the others)."""
    out: list[StoredResult] = []
    for key, text in reversed(list(rows)):
        try:
            out.append(decode_result(str(text), tools))
        except (ValueError, TypeError, KeyError) as exc:
            log.warning("candidates: stored result of %s not read: %s", key, exc)
    return out


class FailureModeQueries(Protocol):
    """The failure-mode index's reads (`GET /api/v1/failure-modes`, the review rules'
    `new_failure_mode`): the state file's `FailureModeIndex` or PostgreSQL's
    `PostgresFailureModes` (every replica's failures)."""

    def top_modes(self, scope: ModeScope, *, limit: int) -> tuple[int, list[ModeCounts]]:
        """(failing conversations in `scope`, its `limit` most frequent modes)."""
        ...

    def previous_version(self, agent: str | None, version: str) -> str | None:
        """The version of `agent` first seen just before `version` (None: none)."""
        ...

    def signatures_of_version(self, scope: ModeScope) -> set[str]:
        """The signatures seen in `scope` (any time)."""
        ...

    def versions(self, agent: str | None = None) -> list[tuple[str, str]]:
        """(agent, version) pairs with stored results, newest first."""
        ...


class ResultsStore(Protocol):
    """The read model's queries over stored results (blocking; cheap by design: every
    query is an ordered index range)."""

    @property
    def failure_modes(self) -> FailureModeQueries:
        """The failure-mode index of the stored results."""
        ...

    def read_connection(self) -> sqlite3.Connection | None:
        """The SQLite connection reads run on (the API's time limit is installed on it),
        or None when the store bounds its queries itself."""
        ...

    def get_result(self, key: str) -> StoredResult | None:
        """The latest stored evaluation of conversation `key`."""
        ...

    def list_results(
        self, where: ResultFilter, *, limit: int, cursor: tuple[float, str] | None = None
    ) -> tuple[list[ResultRow], tuple[float, str] | None]:
        """One page of results matching `where`, newest first, and the next cursor."""
        ...

    def reference_counts(
        self,
        since: float,
        *,
        agent_name: str | None = None,
        agent_version: str | None = None,
        reference_set: str | None = None,
    ) -> dict[str, tuple[int, int]]:
        """reference id → (trials, passes) of results completed since `since`."""
        ...

    def outcome_trend(self, since: float, buckets: int) -> tuple[float, float, list[TrendRow]]:
        """(start, slice seconds, rows) of trials and passes per agent version."""
        ...

    def version_costs(
        self, since: float, *, agent_name: str | None = None, reference_set: str | None = None
    ) -> dict[tuple[str | None, str | None], tuple[list[float | None], list[float | None]]]:
        """(agent, version) → (costs, durations) of the results completed since `since`
        (`index.version_costs`)."""
        ...

    def agent_counts(self, since: float) -> list[AgentCountRow]:
        """Trials and passes per agent × version × reference set × reference of the
        results completed since `since` (pooled pass@k: `api/pooled.py`)."""
        ...

    def unreferenced_results(self, limit: int) -> list[StoredResult]:
        """The newest `limit` evaluated results that matched no reference, oldest first
        (`UNREFERENCED_SQL`: what the reference candidates are mined from)."""
        ...

    @property
    def shared(self) -> bool:
        """True when other replicas write to this store too (PostgreSQL): what one
        replica derives from the results must then be read back from it."""
        ...
