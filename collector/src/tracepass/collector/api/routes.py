"""The list endpoints of the read API (`read_model.py` answers them):

    GET /api/v1/conversations          filtered, newest first, cursor-paginated
    GET /api/v1/references/summary     per-reference pass@1 for a version (vs a baseline)
    GET /api/v1/agents                 the rolling windows per agent × version × set

Mounted on the receiver's HTTP server, which checks the bearer token. A bad parameter
is a 400 naming it; no state file is a 503 (the lists are served from it).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from aiohttp import web

from tracepass.collector.api.params import ParamError
from tracepass.collector.api.read_model import ReadModel
from tracepass.collector.receiver.http_server import GetRoute

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


def _answer(compute: Callable[[], dict[str, Any]]) -> web.Response:
    try:
        return _json(compute())
    except ParamError as exc:
        return _json({"error": str(exc), "parameter": exc.parameter}, status=400)
    except LookupError as exc:
        return _json({"error": str(exc)}, status=503)


def read_routes(model: ReadModel) -> list[GetRoute]:
    async def conversations(request: web.Request) -> web.StreamResponse:
        return _answer(lambda: model.conversations(request.query))

    async def references_summary(request: web.Request) -> web.StreamResponse:
        return _answer(lambda: model.reference_summary(request.query))

    async def agents(request: web.Request) -> web.StreamResponse:
        return _answer(model.agents)

    return [
        (CONVERSATIONS_PATH, conversations),
        (REFERENCES_SUMMARY_PATH, references_summary),
        (AGENTS_PATH, agents),
    ]
