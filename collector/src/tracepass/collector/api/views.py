"""The JSON shape of a rebuilt conversation, shared by `tracepass conversations` and
`GET /api/v1/conversations/{id}` so both always print the same thing (a contract: keep
field names). Rendered when read; nothing stores this shape.
"""

from __future__ import annotations

from typing import Any

from tracepass.collector.state import StoredResult
from tracepass.evaluator.cost_latency import Latency, TimelineSpan, Usage, span_duration_s
from tracepass.evaluator.models import (
    AgentStep,
    Conversation,
    ConversationResult,
    Judgement,
    ToolCall,
    Turn,
)

__all__ = ["conversation_json", "conversation_view_json", "judgement_json", "stored_view_json"]


def tool_call_json(call: ToolCall, *, with_agent: bool = False) -> dict[str, Any]:
    out = {
        "name": call.name,
        "arguments": call.arguments,
        "result": call.result,
        "error": call.error,
        "call_id": call.call_id,
    }
    if with_agent:
        out["agent"] = call.agent
    return out


def step_json(step: AgentStep) -> dict[str, Any]:
    """One agent step (multi-agent turns); `tool_calls` index the turn's `tool_calls`."""
    return {
        "agent": step.agent,
        "kind": step.kind,
        "query": step.query,
        "answer": step.answer,
        "tool_calls": list(step.tool_calls),
        "error": step.error,
        "steps": [step_json(s) for s in step.steps],
    }


# `usage` when a conversation was stored before usage was read: every count unknown.
_NO_USAGE = Usage(missing={"cost_usd": "recorded before tokens and cost were read"})


def usage_json(usage: Usage | None) -> dict[str, Any]:
    """`usage: {input_tokens, output_tokens, cached_input_tokens, reasoning_tokens,
    model_calls, cost_usd, missing}` (a count the spans do not carry is null, not 0;
    `missing` says why a figure is null when there is a reason beyond that)."""
    return (usage or _NO_USAGE).model_dump(mode="json")


def latency_json(latency: Latency | None) -> dict[str, Any] | None:
    if latency is None:
        return None
    data = latency.model_dump(mode="json")
    data.pop("duration_s")
    return data


def timeline_json(span: TimelineSpan) -> dict[str, Any]:
    data = span.model_dump(mode="json")
    data["duration_s"] = span_duration_s(span)
    return data


def _extras(owner: Turn | Conversation) -> dict[str, Any]:
    latency = owner.latency
    return {
        "usage": usage_json(owner.usage),
        "duration_s": None if latency is None else latency.duration_s,
        "latency": latency_json(latency),
    }


def turn_json(turn: Turn) -> dict[str, Any]:
    """A turn; a multi-agent turn (one with agent steps) also names each call's agent and
    lists its `steps` (single-agent turns: the conversation's agent made every call)."""
    multi = bool(turn.steps)
    out: dict[str, Any] = {
        "query": turn.query,
        "answer": turn.answer,
        "tool_calls": [tool_call_json(c, with_agent=multi) for c in turn.tool_calls],
        **_extras(turn),
        "spans": [timeline_json(s) for s in turn.spans],
    }
    if multi:
        out["steps"] = [step_json(s) for s in turn.steps]
    return out


def conversation_json(conversation: Conversation) -> dict[str, Any]:
    return {
        "conversation_id": conversation.id,
        "agent": {"name": conversation.agent_name, "version": conversation.agent_version},
        "trace_ids": list(conversation.trace_ids),
        **_extras(conversation),
        "turns": [turn_json(t) for t in conversation.turns],
    }


def judgement_json(j: Judgement) -> dict[str, Any]:
    """A conversation judge's verdict (docs/api.md): no verdict shows as `passed` and
    `score` null with `outcome` error / skipped_budget and the reason in `error`."""
    return {
        "name": j.name,
        "passed": j.passed,
        "score": j.score,
        "reasoning": j.reasoning,
        "rubric_version": j.rubric_version,
        "model": j.model,
        "outcome": j.outcome.value,
        "error": j.error,
        "truncated": j.truncated,
    }


def conversation_view_json(
    conversation: Conversation,
    result: ConversationResult | None,
    *,
    revision: int,
    status: str = "evaluated",
) -> dict[str, Any]:
    """The conversation API's answer: the conversation shape plus its evaluation."""
    view = conversation_json(conversation)
    view["evaluation"] = None if result is None else result.model_dump(mode="json")
    view["judgements"] = [] if result is None else [judgement_json(j) for j in result.judgements]
    view["revision"] = revision
    view["status"] = status
    view["complete"] = conversation.complete
    return view


def stored_view_json(stored: StoredResult) -> dict[str, Any]:
    """The API's answer for an evaluated conversation, from what the pipeline stored."""
    return conversation_view_json(stored.conversation, stored.result, revision=stored.revision)
