"""Trace and span id validation.

OTLP carries ids as raw bytes; a span whose trace id is not 16 bytes or whose span id
is not 8 bytes (or that is all zero, which W3C Trace Context declares invalid) cannot be
placed in any tree, so it is rejected rather than guessed at. Ids are rendered as
lowercase hex, the form every UI and the OTLP/JSON encoding use.
"""

from __future__ import annotations

_ZERO_TRACE = bytes(16)
_ZERO_SPAN = bytes(8)


def trace_id_hex(raw: bytes) -> str | None:
    """Lowercase hex of a valid trace id, else None."""
    if len(raw) != 16 or raw == _ZERO_TRACE:
        return None
    return raw.hex()


def span_id_hex(raw: bytes) -> str | None:
    """Lowercase hex of a valid span id, else None."""
    if len(raw) != 8 or raw == _ZERO_SPAN:
        return None
    return raw.hex()
