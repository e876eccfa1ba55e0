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
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from tracepass.evaluator.models import Conversation, ToolCall, Turn

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
    agent = getattr(call, "agent", None)
    by = f" (by agent {agent})" if isinstance(agent, str) and agent else ""
    yield f"Tool call {i}: {call.name}{by}"
    yield "  arguments: " + _indent(_json(call.arguments))
    if call.result is not None:
        yield "  result: " + _indent(_json(call.result))
    if call.error is not None:
        yield "  error: " + _indent(call.error)
    if call.result is None and call.error is None:
        yield "  result: (none recorded)"


def _field(obj: Any, *names: str) -> Any:
    for name in names:
        value = getattr(obj, name, None)
        if value is None and isinstance(obj, dict):
            value = obj.get(name)
        if value is not None:
            return value
    return None


def _step_lines(steps: Any) -> Iterable[str]:
    """Sub-agent steps, when the turn carries them (multi-agent assembly): which agent
    ran, what it was asked, the tools it called and what it returned."""
    if not isinstance(steps, list | tuple):
        return
    for n, step in enumerate(steps, 1):
        agent = _field(step, "agent_name", "agent", "name") or "(unnamed agent)"
        yield f"Agent step {n}: {agent}"
        asked = _field(step, "input", "query", "task")
        if asked is not None:
            yield "  asked: " + _indent(_json(asked))
        for i, call in enumerate(_field(step, "tool_calls") or (), 1):
            name = _field(call, "name") or "?"
            yield f"  tool call {i}: {name} " + _indent(_json(_field(call, "arguments") or {}))
        returned = _field(step, "output", "answer", "result")
        if returned is not None:
            yield "  returned: " + _indent(_json(returned))
        error = _field(step, "error")
        if error is not None:
            yield "  error: " + _indent(_json(error))


def _turn_lines(i: int, n: int, turn: Turn) -> Iterable[str]:
    yield f"=== Turn {i} of {n} ==="
    yield "User: " + _indent(turn.query if turn.query is not None else "(no query recorded)")
    yield from _step_lines(getattr(turn, "steps", None))
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
