"""The HTTP read API (`GET /api/v1/conversations/{id}`, the list endpoints of
`routes.py`), the JSON views it and `tracepass conversations` render, and the web UI."""

from tracepass.collector.api.candidates import candidate_json

# Re-exported under a name of its own: `failure_modes` would hide the module of that name.
from tracepass.collector.api.failure_modes import failure_modes as failure_modes_json
from tracepass.collector.api.pooled import pooled_snapshots
from tracepass.collector.api.query import (
    CONVERSATION_PATH,
    ConversationQuery,
    ConversationViews,
    conversation_routes,
)
from tracepass.collector.api.read_model import ReadModel
from tracepass.collector.api.reference_writer import ApprovalError, write_reference
from tracepass.collector.api.review import ReviewQueue
from tracepass.collector.api.routes import read_routes
from tracepass.collector.api.triage import Triage
from tracepass.collector.api.ui import ui_routes
from tracepass.collector.api.ui.humane import duration as humane_duration
from tracepass.collector.api.ui.humane import usd as humane_usd
from tracepass.collector.api.views import conversation_json, conversation_view_json

__all__ = [
    "CONVERSATION_PATH",
    "ApprovalError",
    "ConversationQuery",
    "ConversationViews",
    "ReadModel",
    "ReviewQueue",
    "Triage",
    "candidate_json",
    "conversation_json",
    "conversation_routes",
    "conversation_view_json",
    "failure_modes_json",
    "humane_duration",
    "humane_usd",
    "pooled_snapshots",
    "read_routes",
    "ui_routes",
    "write_reference",
]
