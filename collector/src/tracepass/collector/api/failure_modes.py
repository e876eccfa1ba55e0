"""`GET /api/v1/failure-modes`: how the failing conversations of a scope fail, as
counted failure signatures (docs/failure-modes.md), read from the failure-mode index
the state store keeps as results are stored (`state/failure_index.py`).

Each mode: its signature, count, share of the scope's failing conversations, first and
last seen, a trend (counts in eight equal slices of the scope's first..last failure),
three example conversations (latest first) and `new`: not seen in the baseline version
(`baseline_version`, else the version of the same agent whose first stored result came
just before `agent_version`'s; with no baseline, nothing is new). Times select whole minutes (the
index's counters, `state/failure_index.py`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from aiohttp import web

from tracepass.collector.api.params import ParamError, format_time, parse_time
from tracepass.collector.api.read_model import ReadModel
from tracepass.collector.state import ModeScope, StateStore

__all__ = [
    "DEFAULT_MODES",
    "FAILURE_MODES_PATH",
    "MAX_MODES",
    "failure_mode_routes",
    "failure_modes",
]

FAILURE_MODES_PATH = "/api/v1/failure-modes"
DEFAULT_MODES = 20
MAX_MODES = 200


def _opt(params: Mapping[str, str], name: str) -> str | None:
    value = params.get(name)
    return value if value else None


def _limit(params: Mapping[str, str]) -> int:
    raw = _opt(params, "limit")
    if raw is None:
        return DEFAULT_MODES
    try:
        limit = int(raw)
    except ValueError:
        raise ParamError("limit", f"{raw!r} is not an integer") from None
    if not 1 <= limit <= MAX_MODES:
        raise ParamError("limit", f"must be between 1 and {MAX_MODES}, got {limit}")
    return limit


def failure_modes(
    store: StateStore | None,
    params: Mapping[str, str],
    clock: Callable[[], float] = time.time,
) -> dict[str, Any]:
    """The endpoint's JSON. Raises ParamError (400) or LookupError (no state file)."""
    since = _opt(params, "since")
    until = _opt(params, "until")
    scope = ModeScope(
        agent_name=_opt(params, "agent_name"),
        agent_version=_opt(params, "agent_version"),
        reference_set=_opt(params, "reference_set"),
        since=None if since is None else parse_time("since", since, clock),
        until=None if until is None else parse_time("until", until, clock),
    )
    limit = _limit(params)
    if store is None:
        raise LookupError("this collector keeps no state file (state.path)")
    baseline = _opt(params, "baseline_version")
    index = store.failure_modes

    total, modes = store.read(lambda conn: index.modes(conn, scope, limit=limit))
    base = baseline
    if base is None and scope.agent_version is not None:
        base = index.previous_version(scope.agent_name, scope.agent_version)
    seen = None
    if base is not None:
        seen = index.signatures_of_version(ModeScope(scope.agent_name, base, scope.reference_set))
    return {
        "agent_name": scope.agent_name,
        "agent_version": scope.agent_version,
        "reference_set": scope.reference_set,
        "baseline_version": base,
        "failing_conversations": total,
        "failure_modes": [
            {
                "signature": m.signature,
                "count": m.count,
                "share": (m.count / total) if total else None,
                "first_seen": format_time(m.first_seen),
                "last_seen": format_time(m.last_seen),
                "new": seen is not None and m.signature not in seen,
                "trend": m.trend,
                "examples": m.examples,
            }
            for m in modes
        ],
    }


def failure_versions(store: StateStore | None) -> list[tuple[str, str]]:
    """(agent, version) pairs with stored results, newest first (the UI's sections)."""
    if store is None:
        raise LookupError("this collector keeps no state file (state.path)")
    return store.failure_modes.versions()


def _local(store: object) -> StateStore | None:
    """Failure modes are indexed in the state file only: with a shared PostgreSQL
    results store (`state.results_url`) this replica's own index answers."""
    return store if isinstance(store, StateStore) else None


def failure_mode_routes(
    model: ReadModel, clock: Callable[[], float] = time.time
) -> list[tuple[str, Any]]:
    """The endpoint, answered like the other list endpoints (`routes._answer`: bounded
    parameters, off the event loop, under the query time limit)."""
    from tracepass.collector.api.routes import _answer

    async def handler(request: web.Request) -> web.StreamResponse:
        return await _answer(
            model, request, lambda: failure_modes(_local(model.store), request.query, clock)
        )

    return [(FAILURE_MODES_PATH, handler)]
