"""The HTTP read API (`GET /api/v1/conversations/{id}`) and the JSON views it and
`tracepass conversations` render."""

from tracepass.collector.api.query import (
    CONVERSATION_PATH,
    ConversationQuery,
    ConversationViews,
    conversation_routes,
)
from tracepass.collector.api.views import conversation_json, conversation_view_json

__all__ = [
    "CONVERSATION_PATH",
    "ConversationQuery",
    "ConversationViews",
    "conversation_json",
    "conversation_routes",
    "conversation_view_json",
]
