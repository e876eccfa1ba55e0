"""Trace -> conversation links: how a span without a conversation id finds its
conversation (e.g. a web framework's server span above the agent, which often ends, and
so arrives, after the conversation was evaluated).

A trace is linked when a record naming a conversation arrives for it. Links of open
conversations are plain strings both ways. Links of closed conversations (retained for
late spans, then tombstones) are kept until the conversation is forgotten, in a compact
form: the trace id as an int (44 bytes against an 81-byte string; a conversation has a
trace per turn) in one dict that holds no GC-tracked object, and the conversation keeps
the tuple of its traces' compact ids to take them back.

Which links an evaluated conversation keeps: all of them if some of its spans came
without a conversation id (its instrumentation names the conversation on some spans
only, so a late span may well lack it too); else only those of traces whose root has not
arrived (`Buffer.roots`: a turn's parent is missing, e.g. the server span above the
agent, which ends last). A trace whose root arrived and whose every span named the
conversation keeps no link: a late span in it is a descendant of spans that named the
conversation, and carries the id itself. At a steady rate that is the difference between
≈ 400 bytes and nothing per retained conversation (four traces: one per turn and the
end marker's).
"""

from __future__ import annotations

from collections.abc import Collection

__all__ = ["TraceLinks", "compact_trace"]

CompactTrace = int | str


def compact_trace(trace_id: str) -> CompactTrace:
    """The trace id as an int when it is 32 lowercase hex digits (what OTLP decoding
    gives), else the string itself (the two never collide: an int is not a str)."""
    if len(trace_id) == 32:
        try:
            value = int(trace_id, 16)
        except ValueError:
            return trace_id
        if f"{value:032x}" == trace_id:  # int() also takes "0x", "_", upper case
            return value
    return trace_id


def _expand(trace: CompactTrace) -> str:
    return trace if isinstance(trace, str) else f"{trace:032x}"


class TraceLinks:
    def __init__(self) -> None:
        self.open: dict[str, str] = {}  # trace id -> key of an open conversation
        # key -> its linked traces (few, each linked once: a list, ~150 bytes less per
        # conversation than a set).
        self._traces: dict[str, list[str]] = {}
        self._closed: dict[CompactTrace, str] = {}  # compact trace id -> closed key

    def __len__(self) -> int:
        return len(self.open) + len(self._closed)

    def link(self, trace_id: str, key: str) -> None:
        self.open[trace_id] = key
        self._traces.setdefault(key, []).append(trace_id)

    def add_trace(self, trace_id: str, key: str) -> None:
        """Link `trace_id` to `key` unless it is linked already (restores)."""
        self.open.setdefault(trace_id, key)
        linked = self._traces.setdefault(key, [])
        if trace_id not in linked:
            linked.append(trace_id)

    def closed_route(self, trace_id: str) -> str | None:
        """The closed conversation `trace_id` is linked to, if any."""
        if not self._closed:
            return None
        return self._closed.get(compact_trace(trace_id))

    def route(self, trace_id: str) -> str | None:
        return self.open.get(trace_id) or self.closed_route(trace_id)

    def close(self, key: str, only: Collection[str] | None = None) -> tuple[CompactTrace, ...]:
        """Move `key`'s links (those of the traces `only`, if given; the others are
        dropped) to the compact closed form; returns its traces there."""
        traces = self._traces.pop(key, ())
        out: list[CompactTrace] = []
        for trace in traces:
            if self.open.get(trace) == key:
                del self.open[trace]
                if only is not None and trace not in only:
                    continue
                compact = compact_trace(trace)
                self._closed[compact] = key
                out.append(compact)
        return tuple(out)

    def reopen(self, key: str, traces: tuple[CompactTrace, ...]) -> None:
        """Take a closed conversation's links back into the open form."""
        closed = self._closed
        for compact in traces:
            if closed.get(compact) == key:
                del closed[compact]
                trace = _expand(compact)
                if trace not in self.open:
                    self.link(trace, key)

    def forget_closed(self, key: str, traces: tuple[CompactTrace, ...]) -> None:
        closed = self._closed
        for compact in traces:
            if closed.get(compact) == key:
                del closed[compact]

    def forget_open(self, key: str) -> None:
        for trace in self._traces.pop(key, ()):
            if self.open.get(trace) == key:
                del self.open[trace]
