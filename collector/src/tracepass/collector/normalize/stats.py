"""How normalization read the spans, for the live collector's `/metrics`: spans per
convention and adapter, and fields that could not be read (so a framework that starts
emitting an unsupported shape shows up on a dashboard, not only in `tracepass inspect`).

`normalize_request(..., tally=ReadTally())` counts in its per-span loop, where the
convention and adapters are already at hand (a second pass over the records cost ~3 %
of ingest); the pipeline drains the tally after each request and adds one counter
increment per label set, not per span (an OpenTelemetry `add` costs microseconds).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

NONE: Final = "none"
# Convention label of GenAI events received as log records.
LOG_EVENTS: Final = "genai_log_events"


@dataclass(slots=True)
class ReadTally:
    """Counts since the last `drain`: {(convention, first adapter): spans} and
    {field: spans where it was unreadable} (tool_arguments kept raw, tool_name missing)."""

    read: dict[tuple[str, str], int] = field(default_factory=dict)
    unreadable: dict[str, int] = field(default_factory=dict)
    # {instrumentation scope: spans no convention or custom mapping claimed}.
    unrecognized: dict[str, int] = field(default_factory=dict)

    def count_unreadable(self, field_name: str) -> None:
        self.unreadable[field_name] = self.unreadable.get(field_name, 0) + 1

    def count_unrecognized(self, scope: str, spans: int) -> None:
        self.unrecognized[scope] = self.unrecognized.get(scope, 0) + spans

    def drain_unrecognized(self) -> dict[str, int]:
        out = self.unrecognized
        self.unrecognized = {}
        return out

    def drain(self) -> tuple[dict[tuple[str, str], int], dict[str, int]]:
        out = (self.read, self.unreadable)
        self.read, self.unreadable = {}, {}
        return out
