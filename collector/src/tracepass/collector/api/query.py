"""The conversation read API: `GET /api/v1/conversations/{id}` answered from the
pipeline's results, rendered on each read (`views.py`)."""

from __future__ import annotations

import json
from typing import Any, Protocol

from aiohttp import web

from tracepass.collector.api.views import conversation_view_json, stored_view_json
from tracepass.collector.pipeline import Pipeline
from tracepass.collector.receiver import GetRoute

__all__ = ["CONVERSATION_PATH", "ConversationQuery", "ConversationViews", "conversation_routes"]

CONVERSATION_PATH = "/api/v1/conversations/{conversation_id}"


class ConversationQuery(Protocol):
    def conversation_view(self, conversation_id: str) -> dict[str, Any] | None:
        """The rebuilt conversation with its latest evaluation (JSON-ready), or None."""
        ...


class ConversationViews:
    """`ConversationQuery` over a running `Pipeline`."""

    def __init__(self, pipeline: Pipeline) -> None:
        self._pipeline = pipeline

    def conversation_view(self, conversation_id: str) -> dict[str, Any] | None:
        stored = self._pipeline.latest_result(conversation_id)
        still_open = self._pipeline.open_conversation(conversation_id)
        if still_open is not None:
            # Still being assembled (or re-assembled after late spans): show what we have
            # next to the latest evaluation, if any.
            conversation, revision = still_open
            view = conversation_view_json(conversation, None, revision=revision, status="open")
            if stored is not None and stored.result is not None:
                view["evaluation"] = stored.result.model_dump(mode="json")
            return view
        return None if stored is None else stored_view_json(stored)


def conversation_routes(query: ConversationQuery) -> list[GetRoute]:
    """The routes to mount on the receiver's HTTP server (it checks the bearer token)."""

    async def conversation(request: web.Request) -> web.StreamResponse:
        conversation_id = request.match_info["conversation_id"]
        view = query.conversation_view(conversation_id)
        if view is None:
            return web.json_response(
                {"error": f"conversation {conversation_id!r} not found"}, status=404
            )
        return web.Response(
            body=json.dumps(view, ensure_ascii=False).encode(), content_type="application/json"
        )

    return [(CONVERSATION_PATH, conversation)]
