"""How one batch of records was read, for the live collector's `/metrics`: spans per
convention and adapter, and fields that could not be read (so a framework that starts
emitting an unsupported shape shows up on a dashboard, not only in `tracepass inspect`).

One pass over the records the normalizer already built (their `attributes` carry the
convention and adapters); the pipeline adds the tallies to its counters once per label
set per request, not once per span (an OpenTelemetry counter `add` costs microseconds).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from tracepass.collector.normalize.arguments import RAW_KEY
from tracepass.collector.normalize.records import RecordKind, SpanRecord
from tracepass.collector.normalize.registry import ADAPTERS_ATTR, CONVENTION_ATTR

NONE: Final = "none"
_TOOL = RecordKind.TOOL
_EVENT = RecordKind.EVENT


def tally(
    records: Iterable[SpanRecord],
) -> tuple[dict[tuple[str, str], int], dict[str, int]]:
    """({(convention, adapter): spans}, {field: spans where it was unreadable}).

    A span changed by several adapters counts under the first; log events count under
    the convention `genai_log_events`. Unreadable: tool arguments kept raw, tool spans
    without a tool name."""
    read: dict[tuple[str, str], int] = {}
    unreadable: dict[str, int] = {}
    for rec in records:
        attrs = rec.attributes
        convention = attrs.get(CONVENTION_ATTR)
        adapters = attrs.get(ADAPTERS_ATTR)
        if rec.kind is _EVENT:
            convention = "genai_log_events"
        key = (convention or NONE, adapters[0] if adapters else NONE)
        read[key] = read.get(key, 0) + 1
        if rec.kind is _TOOL:
            if not rec.tool_name:
                unreadable["tool_name"] = unreadable.get("tool_name", 0) + 1
            args = rec.tool_arguments
            if args and RAW_KEY in args:
                unreadable["tool_arguments"] = unreadable.get("tool_arguments", 0) + 1
    return read, unreadable
