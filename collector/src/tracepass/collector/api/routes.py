"""The list endpoints of the read API (`read_model.py` answers them):

    GET /api/v1/conversations          filtered, newest first, cursor-paginated
    GET /api/v1/references/summary     per-reference pass@1 for a version (vs a baseline)
    GET /api/v1/agents                 the rolling windows per agent × version × set

Mounted on the receiver's HTTP server, which checks the bearer token. A bad parameter
is a 400 naming it; no state file is a 503 (the lists are served from it). Queries run
off the event loop under `limits.query_timeout_s` (`query_guard.py`): 504 beyond it,
503 + Retry-After when too many wait.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from aiohttp import web

from tracepass.collector.api.params import ParamError, check_bounds
from tracepass.collector.api.query_guard import QueryRefused
from tracepass.collector.api.read_model import ReadModel
from tracepass.collector.receiver import GetRoute

__all__ = ["AGENTS_PATH", "CONVERSATIONS_PATH", "REFERENCES_SUMMARY_PATH", "read_routes"]

CONVERSATIONS_PATH = "/api/v1/conversations"
REFERENCES_SUMMARY_PATH = "/api/v1/references/summary"
AGENTS_PATH = "/api/v1/agents"


def _json(body: Any, status: int = 200) -> web.Response:
    return web.Response(
        status=status,
        body=json.dumps(body, ensure_ascii=False).encode(),
        content_type="application/json",
    )


async def _answer(
    model: ReadModel, request: web.Request, compute: Callable[[], dict[str, Any]]
) -> web.Response:
    """Bounded parameters, then `compute` off the event loop under the time limit
    (`query_guard.py`): 400 for a bad parameter, 503 (+ Retry-After) when busy or
    without a state file, 504 when the query ran out of time."""
    try:
        check_bounds(request.query.items())
        return _json(await model.run(compute))
    except ParamError as exc:
        return _json({"error": str(exc), "parameter": exc.parameter}, status=400)
    except QueryRefused as exc:
        response = _json({"error": str(exc)}, status=exc.status)
        if exc.retry_after_s is not None:
            response.headers["Retry-After"] = str(max(1, math.ceil(exc.retry_after_s)))
        return response
    except LookupError as exc:
        return _json({"error": str(exc)}, status=503)


def read_routes(model: ReadModel) -> list[GetRoute]:
    async def conversations(request: web.Request) -> web.StreamResponse:
        return await _answer(model, request, lambda: model.conversations(request.query))

    async def references_summary(request: web.Request) -> web.StreamResponse:
        return await _answer(model, request, lambda: model.reference_summary(request.query))

    async def agents(request: web.Request) -> web.StreamResponse:
        return await _answer(model, request, model.agents)

    return [
        (CONVERSATIONS_PATH, conversations),
        (REFERENCES_SUMMARY_PATH, references_summary),
        (AGENTS_PATH, agents),
    ]
