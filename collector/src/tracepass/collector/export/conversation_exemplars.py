"""Which trace an evaluated conversation's counter samples point to (exemplars).

The conversation becomes the exemplar of every series it was just counted in
(`tracepass_conversations` and `tracepass_turns` by outcome): its first failing turn's
trace — the trace to look at — else its last trace; a turn series points to that
turn's own trace (`exemplars.py` stores them and attaches them at exposition).
"""

from __future__ import annotations

from tracepass.collector.export.exemplars import ExemplarStore
from tracepass.evaluator.models import Conversation, ConversationResult
from tracepass.evaluator.stats.rolling import Key

__all__ = ["observe_conversation"]


def observe_conversation(
    store: ExemplarStore,
    result: ConversationResult,
    key: Key,
    outcome: str,
    outcomes: list[str],
    turn_tally: dict[str, int],
    conversation: Conversation | None,
    now: float,
) -> None:
    """Make this conversation the exemplar of the series it was counted in; `outcomes`
    are its turns' outcomes in order, `turn_tally` their counts."""
    if conversation is None:
        traces: list[str | None] = []
        fallback = None
    else:
        traces = [t.trace_id for t in conversation.turns]
        fallback = conversation.trace_ids[-1] if conversation.trace_ids else None
    n = len(traces)
    trace = fallback
    for i, turn in enumerate(result.turns):
        if turn.correct is False and i < n:
            trace = traces[i] or fallback
            break
    series = [("tracepass_conversations", (*key, outcome), trace, 1.0)]
    for i, turn_outcome in enumerate(outcomes):
        series.append(
            (
                "tracepass_turns",
                (*key, turn_outcome),
                (traces[i] if i < n else None) or fallback,
                float(turn_tally[turn_outcome]),
            )
        )
    store.observe_many(series, conversation_id=result.conversation_id, timestamp=now)
