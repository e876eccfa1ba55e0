"""Where a span's conversation id comes from: the attribute keys, in resolution order.

Its own module (not the package face) because every reader of spans and log events
needs it: `normalize_request`, `normalize_logs_request`, routing and sampling.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tracepass.collector.normalize import traceloop
from tracepass.collector.normalize.extract import as_str
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
    for key in CONVERSATION_ID_KEYS:
        value = attrs.get(key)
        if value is not None:
            text = as_str(value)
            if text is not None:
                return text
    for key in extra_keys:
        value = attrs.get(key)
        if value is not None:
            text = as_str(value)
            if text is not None:
                return text
    return resource_fallback
