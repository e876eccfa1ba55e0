"""Mastra's own tracing exported by its `OtelExporter` (`@mastra/otel-exporter`, scope of
the same name).

Its spans follow the GenAI semconv (`invoke_agent` per agent run with
`gen_ai.conversation.id` from the memory thread, `chat` per model call with
`gen_ai.output.messages`, `execute_tool` with `gen_ai.tool.call.*`), which the GenAI
convention reads. What it leaves out: the `chat` spans carry no input messages, and the
run's input is only in `mastra.agent_run.input` on the `invoke_agent` span — the user's
text as it was passed to `agent.generate` (a plain string), or the JSON of the messages
when the application passed a message list. The query is taken from there.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tracepass.collector.normalize.messages import last_text_in
from tracepass.collector.normalize.registry import Adapter
from tracepass.collector.records import NOT_JSON, RecordKind, SpanRecord, loads

RUN_INPUT = "mastra.agent_run.input"


def run_query(raw: Any) -> str | None:
    """The user's text of an agent run's input: the string itself, or the last user
    message of a JSON message list (or of `{"messages": [...]}`)."""
    if not isinstance(raw, str) or not raw:
        return None
    decoded = loads(raw)
    if decoded is NOT_JSON or isinstance(decoded, str | int | float | bool) or decoded is None:
        return raw
    if isinstance(decoded, dict) and isinstance(decoded.get("messages"), list):
        decoded = decoded["messages"]
    return last_text_in(decoded, "user")


def adapt(rec: SpanRecord, attrs: dict[str, Any], span: Span) -> bool:
    if rec.kind is not RecordKind.TURN or rec.input_text is not None:
        return False
    query = run_query(attrs.get(RUN_INPUT))
    if query is None:
        return False
    rec.input_text = query
    return True


ADAPTER = Adapter(
    "mastra",
    scopes=("@mastra/otel-exporter",),
    adapt=adapt,
    doc="query from the agent run's input (`mastra.agent_run.input`: the text, or the last "
    "user message of a message list); `chat` spans carry no input messages",
)
