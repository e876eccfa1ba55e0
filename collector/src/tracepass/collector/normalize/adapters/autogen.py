"""AutoGen AgentChat + OpenInference (scope `openinference.instrumentation.autogen_agentchat`).

The agent span's input is `{"messages": [<repr of a pydantic message>, …]}` where each
message reads `id='…' source='user' … content="…" type='TextMessage'`: the query is
the `content` literal of the last message from `source='user'`. (AutoGen's native
`execute_tool` spans nested in OpenInference's TOOL spans are merged by assembly.)
"""

from __future__ import annotations

from typing import Any

from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tracepass.collector.normalize.adapters._shapes import decoded, literal_after
from tracepass.collector.normalize.registry import SOURCE_ADAPTER, Adapter, note_source
from tracepass.collector.records import RecordKind, SpanRecord


def _query(value: Any) -> str | None:
    state = decoded(value)
    messages = state.get("messages") if isinstance(state, dict) else None
    if not isinstance(messages, list):
        return None
    for message in reversed(messages):
        if isinstance(message, str) and "source='user'" in message:
            found = literal_after(message, " content=")
            if found is not None:
                return found[0]
    return None


def adapt(rec: SpanRecord, attrs: dict[str, Any], span: Span) -> bool:
    if rec.kind is not RecordKind.TURN:
        return False
    query = _query(attrs.get("input.value"))
    if query is None:
        return False
    rec.input_text = query
    note_source(rec, "input_text", SOURCE_ADAPTER)
    return True


ADAPTER = Adapter(
    "autogen",
    scopes=("openinference.instrumentation.autogen",),
    adapt=adapt,
    doc="query from the agent span's message reprs",
)
