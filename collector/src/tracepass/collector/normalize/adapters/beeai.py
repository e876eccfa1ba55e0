"""BeeAI Framework under OpenInference (`openinference.instrumentation.beeai`).

* A tool span's input is the tool run's call, `{"input": {…arguments}, "options": …}`:
  the arguments are its `input`.
* A failing tool's span records BeeAI's wrapper (`exception.message` = `"Tool Error"`);
  the cause is in its `output.value` (`ToolError(…): Tool Error … ToolFailure(…):
  <message>`), which is taken as the error (and is not a result).
* BeeAI's emitter `error` event becomes a TOOL span of its own (span name `error`,
  `metadata.path` = `tool.custom.<name>.error`, no `tool.name`): not a second call.
* The agent's own `final_answer` tool carries the answer to the user (the agent span has
  it too): the end of the turn, not a tool the agent chose.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tracepass.collector.normalize.registry import Adapter
from tracepass.collector.records import (
    RecordKind,
    SpanRecord,
    loads,
    store_tool_arguments,
    store_tool_result,
)

INPUT = "input.value"
OUTPUT = "output.value"
EVENT_PATH = "metadata.path"
FINAL_ANSWER = "final_answer"
_CALL_KEYS = frozenset({"input", "options"})


def _not_a_call(rec: SpanRecord) -> bool:
    rec.kind = RecordKind.OTHER
    rec.tool_name = None
    store_tool_arguments(rec, None)
    store_tool_result(rec, None)
    return True


def adapt(rec: SpanRecord, attrs: dict[str, Any], span: Span) -> bool:
    if rec.kind is not RecordKind.TOOL:
        return False
    if EVENT_PATH in attrs or rec.tool_name == FINAL_ANSWER:
        return _not_a_call(rec)
    changed = False
    call = loads(attrs.get(INPUT))
    if isinstance(call, dict) and call.keys() <= _CALL_KEYS and isinstance(call.get("input"), dict):
        store_tool_arguments(rec, call["input"])
        changed = True
    output = attrs.get(OUTPUT)
    if rec.error is not None and isinstance(output, str) and output.startswith("ToolError"):
        rec.error = output.strip()
        store_tool_result(rec, None)
        changed = True
    return changed


ADAPTER = Adapter(
    "beeai",
    scopes=("openinference.instrumentation.beeai",),
    adapt=adapt,
    doc='tool input `{"input": args, "options"}` → args; a failing tool\'s cause from its '
    "output; the emitter's `error` event span and the `final_answer` tool → not tool calls",
)
