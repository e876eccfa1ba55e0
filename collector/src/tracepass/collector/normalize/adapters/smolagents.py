"""smolagents + OpenInference (scope `openinference.instrumentation.smolagents`).

* Tool input is the call wrapper `{"args": [], "sanitize_inputs_outputs": true,
  "kwargs": {...}}`: the keywords are the arguments.
* Every run ends with the framework's own `final_answer` tool, whose argument is the
  turn's answer: it is not a tool the agent chose, so its record becomes OTHER with the
  answer role (assembly uses it when the turn span has no answer).
* The agent span's input is `{"task": …, "stream", "reset", …}`: the task is the query.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tracepass.collector.normalize.adapters._shapes import decoded, unwrap_call_arguments
from tracepass.collector.normalize.registry import (
    ROLE_ANSWER,
    ROLE_ATTR,
    SOURCE_ADAPTER,
    Adapter,
    note_source,
)
from tracepass.collector.records import RecordKind, SpanRecord

_CALL_KEYS = frozenset({"args", "kwargs", "sanitize_inputs_outputs"})
ANSWER_TOOL = "final_answer"


def _answer_of(arguments: dict[str, Any]) -> str | None:
    value = arguments.get("answer")
    if value is None:
        positional = arguments.get("_args")
        value = positional[0] if isinstance(positional, list) and positional else None
    if value is None and len(arguments) == 1:
        value = next(iter(arguments.values()))
    if value is None:
        return None
    return value if isinstance(value, str) else str(value)


def adapt(rec: SpanRecord, attrs: dict[str, Any], span: Span) -> bool:
    kind = rec.kind
    if kind is RecordKind.TOOL:
        changed = unwrap_call_arguments(rec, _CALL_KEYS)
        if rec.tool_name == ANSWER_TOOL:
            rec.kind = RecordKind.OTHER
            rec.output_text = _answer_of(rec.tool_arguments or {})
            rec.attributes[ROLE_ATTR] = ROLE_ANSWER
            changed = True
        return changed
    if kind is RecordKind.TURN:
        state = decoded(attrs.get("input.value"))
        task = state.get("task") if isinstance(state, dict) else None
        if isinstance(task, str) and task != rec.input_text:
            rec.input_text = task
            note_source(rec, "input_text", SOURCE_ADAPTER)
            return True
    return False


ADAPTER = Adapter(
    "smolagents",
    scopes=("openinference.instrumentation.smolagents",),
    adapt=adapt,
    doc="call-wrapper arguments unwrapped; `final_answer` tool → the turn's answer; "
    '`{"task"}` → query',
)
