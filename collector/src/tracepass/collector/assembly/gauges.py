"""Assembly's instrument updates, batched: one `add` per instrument at the end of each
public call instead of one per span or conversation (an OTel SDK `add` costs ~5 us; per
conversation opened and completed that was ~15 us)."""

from __future__ import annotations

from tracepass.collector.instruments import CollectorInstruments

__all__ = ["AssemblyGauges"]


class AssemblyGauges:
    """Counts accumulate here; `flush` reports them and, for the three levels the
    assembler passes, the difference from what was reported last."""

    def __init__(self, instruments: CollectorInstruments) -> None:
        self.instruments = instruments
        self.completed: dict[str, int] = {}  # conversations_completed by reason
        self.revisions = 0
        self._reported = (0, 0, 0)
        # Every gauge exists from the start (at 0): batched deltas that net to zero would
        # otherwise leave them absent, and an absent series reads as "no data".
        instruments.buffered_spans.add(0)
        instruments.retained_spans.add(0)
        instruments.open_conversations.add(0)

    def flush(self, open_spans: int, retained_spans: int, open_conversations: int) -> None:
        """Report `tracepass_buffered_spans` (records of open conversations),
        `tracepass_retained_spans`, `tracepass_open_conversations` and the counts."""
        ins = self.instruments
        spans, retained, convs = self._reported
        if open_spans != spans:
            ins.buffered_spans.add(open_spans - spans)
        if retained_spans != retained:
            ins.retained_spans.add(retained_spans - retained)
        if open_conversations != convs:
            ins.open_conversations.add(open_conversations - convs)
        self._reported = (open_spans, retained_spans, open_conversations)
        if self.completed:
            for reason, n in self.completed.items():
                ins.conversations_completed.add(n, {"reason": reason})
            self.completed.clear()
        if self.revisions:
            ins.revisions.add(self.revisions)
            self.revisions = 0
