"""LlamaIndex + OpenInference (scope `openinference.instrumentation.llama_index`).

* Tool input is the call's keywords wrapped as `{"kwargs": {...}}` (positional values,
  if any, under `"args"`): the keywords are the arguments.
* Tool output is the serialized `ToolOutput` (`{"blocks", "tool_name", "raw_input",
  "raw_output", "is_error"}`): `raw_output` is the plain result.
* The root workflow CHAIN's text output is the repr of the final event
  (`StopEvent(result=AgentOutput(…))`), cut short by the instrumentation: not an
  answer. It is dropped so assembly takes the last model output as the answer.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tracepass.collector.normalize.adapters._shapes import (
    decoded,
    set_result,
    unwrap_call_arguments,
)
from tracepass.collector.normalize.registry import SOURCE_ADAPTER, Adapter, note_source
from tracepass.collector.records import RecordKind, SpanRecord

_CALL_KEYS = frozenset({"args", "kwargs"})
_TOOL_OUTPUT_KEYS = frozenset({"raw_output", "tool_name"})
REPR_ANSWER_PREFIXES = ("StopEvent(", "AgentOutput(", "ChatMessage(")


def adapt(rec: SpanRecord, attrs: dict[str, Any], span: Span) -> bool:
    kind = rec.kind
    if kind is RecordKind.TOOL:
        changed = unwrap_call_arguments(rec, _CALL_KEYS)
        result = decoded(rec.tool_result)
        if isinstance(result, dict) and result.keys() >= _TOOL_OUTPUT_KEYS:
            set_result(rec, result["raw_output"])
            changed = True
        return changed
    answer = rec.output_text
    if kind is RecordKind.TURN and answer is not None and answer.startswith(REPR_ANSWER_PREFIXES):
        rec.output_text = None
        note_source(rec, "output_text", SOURCE_ADAPTER)
        return True
    return False


ADAPTER = Adapter(
    "llamaindex",
    scopes=("openinference.instrumentation.llama_index",),
    adapt=adapt,
    doc='tool input `{"kwargs"}` → arguments; ToolOutput → `raw_output`; '
    "`StopEvent(…)` repr answers dropped",
)
