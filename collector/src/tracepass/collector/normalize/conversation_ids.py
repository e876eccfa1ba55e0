"""Where a span's conversation id comes from: the attribute keys, in resolution order.

Its own module (not the package face) because every reader of spans and log events
needs it: `normalize_request`, `normalize_logs_request`, routing and sampling.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tracepass.collector.normalize import traceloop
from tracepass.collector.normalize.extract import first_str
from tracepass.instrumentation import semconv as sc

__all__ = ["CONVERSATION_ID_KEYS", "resolve_conversation_id"]

# Resolution order of the conversation id (first non-empty wins); then the configured
# extra keys on the span, then the same extra keys on the resource.
CONVERSATION_ID_KEYS: tuple[str, ...] = (
    sc.CONVERSATION_ID,
    "session.id",
    traceloop.ASSOCIATION + "session_id",
    traceloop.ASSOCIATION + "conversation_id",
    traceloop.ASSOCIATION + "thread_id",
)


def resolve_conversation_id(
    attrs: dict[str, Any], extra_keys: Sequence[str] = (), resource_fallback: str | None = None
) -> str | None:
    """The conversation id of one span (see `CONVERSATION_ID_KEYS`); None means the
    collector treats the trace as the conversation."""
    found = first_str(attrs, CONVERSATION_ID_KEYS)
    if found is None:
        found = first_str(attrs, extra_keys)
    return resource_fallback if found is None else found
