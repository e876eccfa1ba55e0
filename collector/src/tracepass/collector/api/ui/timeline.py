"""The conversation page's timeline: a waterfall of the conversation's spans (agent steps,
model calls, tool calls, errors) with durations, tokens and cost per model call.

Rendered on the server as SVG geometry (bar offsets and widths are SVG attributes, not
CSS or script), so the page needs no script and works under a Content-Security-Policy
that allows none. The figures come from the stored timeline spans (`Turn.spans`), the
same ones the API returns, so a number on the page is the API's number.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from tracepass.collector.api.ui import humane
from tracepass.evaluator.cost_latency import TimelineSpan, span_duration_s
from tracepass.evaluator.models import Conversation

__all__ = ["Timeline", "TimelineRow", "timeline_of"]

BAR_WIDTH: Final = 560  # px of the bar area
ROW_HEIGHT: Final = 18
_INDENT: Final = 12  # px per nesting level in the label column
_MAX_DEPTH: Final = 12
COLORS: Final = {
    "turn": "#5b6b8c",
    "model": "#3d7be0",
    "tool": "#2f9e6a",
    "other": "#b4bccb",
}
ERROR_COLOR: Final = "#d33b3b"


@dataclass(frozen=True, slots=True)
class TimelineRow:
    turn: int  # 1-based
    kind: str
    name: str
    depth: int
    x: float  # bar start, px in the bar area
    width: float  # bar width, px (at least 1)
    y: int
    color: str
    duration_s: float | None
    offset_s: float | None
    error: str | None
    model: str | None
    input_tokens: int | None
    output_tokens: int | None
    cached_input_tokens: int | None
    reasoning_tokens: int | None
    cost_usd: float | None
    missing: dict[str, str]


@dataclass(frozen=True, slots=True)
class Timeline:
    rows: list[TimelineRow]
    total_s: float
    height: int
    bar_width: int
    ticks: list[tuple[float, str]]  # (x px, label)


def _depths(spans: tuple[TimelineSpan, ...]) -> dict[str, int]:
    """Nesting level of each stored span among the stored ones; a span whose parent was
    not stored (a framework-internal step) sits right under the turn's own (the first)."""
    parents = {s.span_id: s.parent_span_id for s in spans}
    out: dict[str, int] = {}
    for i, s in enumerate(spans):
        depth, parent = 0, s.parent_span_id
        while parent in parents and depth < _MAX_DEPTH:
            depth += 1
            parent = parents[parent]
        out[s.span_id] = max(depth, 1) if i else depth
    return out


def _ticks(total_s: float) -> list[tuple[float, str]]:
    if total_s <= 0:
        return [(0.0, "0 s")]
    steps = 4
    return [(BAR_WIDTH * i / steps, humane.duration(total_s * i / steps)) for i in range(steps + 1)]


def timeline_of(conversation: Conversation) -> Timeline | None:
    """The waterfall of every stored span of the conversation (None: no spans)."""
    timed = [s for t in conversation.turns for s in t.spans if span_duration_s(s) is not None]
    if not timed:
        return None
    start = min(s.start_ns for s in timed)
    end = max(s.end_ns for s in timed)
    total_ns = max(end - start, 1)
    rows: list[TimelineRow] = []
    y = 0
    for index, turn in enumerate(conversation.turns, start=1):
        depths = _depths(turn.spans)
        for span in turn.spans:
            duration = span_duration_s(span)
            if duration is None:
                x, width, offset = 0.0, 0.0, None
            else:
                x = BAR_WIDTH * (span.start_ns - start) / total_ns
                width = max(1.0, BAR_WIDTH * (span.end_ns - span.start_ns) / total_ns)
                offset = (span.start_ns - start) / 1e9
            rows.append(
                TimelineRow(
                    turn=index,
                    kind=span.kind,
                    name=span.name,
                    depth=depths.get(span.span_id, 0) * _INDENT,
                    x=x,
                    width=width,
                    y=y,
                    color=ERROR_COLOR if span.error else COLORS.get(span.kind, COLORS["other"]),
                    duration_s=duration,
                    offset_s=offset,
                    error=span.error,
                    model=span.model,
                    input_tokens=span.input_tokens,
                    output_tokens=span.output_tokens,
                    cached_input_tokens=span.cached_input_tokens,
                    reasoning_tokens=span.reasoning_tokens,
                    cost_usd=span.cost_usd,
                    missing=dict(span.missing),
                )
            )
            y += ROW_HEIGHT
    total_s = total_ns / 1e9
    return Timeline(
        rows=rows, total_s=total_s, height=y + 4, bar_width=BAR_WIDTH, ticks=_ticks(total_s)
    )
