"""The HTTP read API (`GET /api/v1/conversations/{id}`, the list endpoints of
`routes.py`), the JSON views it and `tracepass conversations` render, and the web UI."""

from tracepass.collector.api.query import (
    CONVERSATION_PATH,
    ConversationQuery,
    ConversationViews,
    conversation_routes,
)
from tracepass.collector.api.read_model import ReadModel
from tracepass.collector.api.routes import read_routes
from tracepass.collector.api.views import conversation_json, conversation_view_json

__all__ = [
    "CONVERSATION_PATH",
    "ConversationQuery",
    "ConversationViews",
    "ReadModel",
    "conversation_json",
    "conversation_routes",
    "conversation_view_json",
    "read_routes",
]
