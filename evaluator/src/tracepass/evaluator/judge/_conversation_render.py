"""A whole conversation as the text a conversation judge reads, cut to a token budget.

Rendered once per conversation (every judge of it reads the same text): each turn's
query, every tool call with its arguments, result and error (and the agent that made it,
when the spans said), sub-agent steps when the assembly recorded them, the answer and
the turn's error. The text is data: the judge prompt wraps it in a delimited block whose
tag is made inert inside it (`judge.block`).

Truncation is middle-out: a long conversation keeps its beginning (what the user asked
first) and its end (how it finished) and loses the middle, with a line saying how much
was left out; the prompt says so too. Tokens are estimated, not counted (no tokenizer is
assumed): one token per 4 bytes of UTF-8, which over-counts English and under-counts
some scripts; docs/judges.md says to leave a margin below the model's context window.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from tracepass.evaluator.models import AgentStep, Conversation, ToolCall, Turn

__all__ = [
    "BYTES_PER_TOKEN",
    "RenderedConversation",
    "estimate_tokens",
    "fit_middle_out",
    "render_conversation",
]

BYTES_PER_TOKEN = 4
# A cut snaps back to a line boundary when one is this close, so lines stay whole.
_SNAP_CHARS = 240


def estimate_tokens(text: str) -> int:
    """Estimated tokens of `text`: ceil(UTF-8 bytes / 4)."""
    return -(-len(text.encode("utf-8")) // BYTES_PER_TOKEN)


@dataclass(frozen=True, slots=True)
class RenderedConversation:
    """The judge's view: `text` (possibly cut), and how much of the full text was cut."""

    text: str
    full_chars: int
    omitted_chars: int

    @property
    def truncated(self) -> bool:
        return self.omitted_chars > 0


def _json(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except ValueError:  # circular structures from odd sources
        return repr(value)


def _indent(text: str, prefix: str = "    ") -> str:
    return text.replace("\n", "\n" + prefix)


def _call_lines(i: int, call: ToolCall) -> Iterable[str]:
    by = f" (by agent {call.agent})" if call.agent else ""
    yield f"Tool call {i}: {call.name}{by}"
    yield "  arguments: " + _indent(_json(call.arguments))
    if call.result is not None:
        yield "  result: " + _indent(_json(call.result))
    if call.error is not None:
        yield "  error: " + _indent(call.error)
    if call.result is None and call.error is None:
        yield "  result: (none recorded)"


def _step_lines(
    steps: Sequence[AgentStep], calls: Sequence[ToolCall], depth: int = 0
) -> Iterable[str]:
    """Sub-agent steps of a turn (multi-agent assembly), nested as they ran: which agent
    ran (a nested run or a hand-off), what it was asked, the turn's tool calls it made
    (by their number below), what it returned and its error."""
    pad = "  " * depth
    for n, step in enumerate(steps, 1):
        how = "hand-off to" if step.kind == "handoff" else "sub-agent"
        yield f"{pad}Agent step {n}: {how} {step.agent or '(unnamed agent)'}"
        if step.query is not None:
            yield f"{pad}  asked: " + _indent(step.query)
        if step.tool_calls:
            made = ", ".join(
                f"{i + 1} ({calls[i].name})" if 0 <= i < len(calls) else str(i + 1)
                for i in step.tool_calls
            )
            yield f"{pad}  made tool calls: {made}"
        if step.answer is not None:
            yield f"{pad}  returned: " + _indent(step.answer)
        if step.error is not None:
            yield f"{pad}  error: " + _indent(step.error)
        yield from _step_lines(step.steps, calls, depth + 1)


def _turn_lines(i: int, n: int, turn: Turn) -> Iterable[str]:
    yield f"=== Turn {i} of {n} ==="
    yield "User: " + _indent(turn.query if turn.query is not None else "(no query recorded)")
    yield from _step_lines(turn.steps, turn.tool_calls)
    for k, call in enumerate(turn.tool_calls, 1):
        yield from _call_lines(k, call)
    yield "Agent answer: " + _indent(
        turn.answer if turn.answer is not None else "(no answer recorded)"
    )
    if turn.error is not None:
        yield "Turn error: " + _indent(turn.error)


def render_full(conversation: Conversation) -> str:
    """Every turn of `conversation`, uncut."""
    n = len(conversation.turns)
    agent = " ".join(x for x in (conversation.agent_name, conversation.agent_version) if x)
    head = f"Conversation with {n} turn(s)" + (f", agent {agent}" if agent else "")
    if not conversation.complete:
        head += " (not complete: the collector stopped waiting for it)"
    lines = [head]
    for i, turn in enumerate(conversation.turns, 1):
        lines.extend(_turn_lines(i, n, turn))
    return "\n".join(lines)


def _snap_end(text: str) -> str:
    """`text` cut back to its last newline, when one is near its end."""
    cut = text.rfind("\n", max(0, len(text) - _SNAP_CHARS))
    return text[: cut + 1] if cut > 0 else text


def _snap_start(text: str) -> str:
    cut = text.find("\n", 0, _SNAP_CHARS)
    return text[cut + 1 :] if cut >= 0 and cut + 1 < len(text) else text


def fit_middle_out(text: str, max_tokens: int) -> RenderedConversation:
    """`text` if it fits `max_tokens` (estimated), else its head and tail with the middle
    replaced by one line saying how many characters were left out."""
    full = len(text)
    if estimate_tokens(text) <= max_tokens:
        return RenderedConversation(text, full, 0)
    data = text.encode("utf-8")
    # Room for the omission line (≤ 120 bytes), then half the rest at each end.
    half = max(0, (max_tokens * BYTES_PER_TOKEN - 120) // 2)
    head = _snap_end(data[:half].decode("utf-8", errors="ignore"))
    tail = _snap_start(data[len(data) - half :].decode("utf-8", errors="ignore")) if half else ""
    omitted = full - len(head) - len(tail)
    marker = f"[… {omitted} characters omitted from the middle to fit the judge's token budget …]"
    body = head + ("" if head.endswith("\n") or not head else "\n") + marker
    if tail:
        body += "\n" + tail
    return RenderedConversation(body, full, omitted)


def render_conversation(conversation: Conversation, max_tokens: int) -> RenderedConversation:
    """The judge's view of `conversation` within `max_tokens` (estimated)."""
    return fit_middle_out(render_full(conversation), max_tokens)
