"""AG2 (the classic `autogen` ConversableAgent API) under OpenInference
(`openinference.instrumentation.ag2`).

Its TOOL spans (`execute_function`) record the call as `input.value` =
`{"name", "arguments": "<JSON text>"}` and the return value of `execute_function` as
`output.value` = `[is_success, {"name", "role", "content"}]`; a failure has the generic
status message `tool execution failed`, its cause only in that `content`
(`Error: <message>`). The arguments are taken from `tool_call.function.arguments`, the
result (or, when `is_success` is false, the error) from the content.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tracepass.collector.normalize.registry import Adapter
from tracepass.collector.records import (
    RecordKind,
    SpanRecord,
    deferred_arguments,
    loads,
    store_tool_arguments,
    store_tool_result,
)

ARGUMENTS = "tool_call.function.arguments"
OUTPUT = "output.value"


def adapt(rec: SpanRecord, attrs: dict[str, Any], span: Span) -> bool:
    if rec.kind is not RecordKind.TOOL:
        return False
    changed = False
    arguments = attrs.get(ARGUMENTS)
    if isinstance(arguments, str):
        store_tool_arguments(rec, deferred_arguments(arguments))
        changed = True
    output = loads(attrs.get(OUTPUT))
    if (
        isinstance(output, list)
        and len(output) == 2
        and isinstance(output[0], bool)
        and isinstance(output[1], dict)
        and "content" in output[1]
    ):
        content = output[1]["content"]
        if output[0]:
            store_tool_result(rec, content)
        else:
            rec.error = str(content)
            store_tool_result(rec, None)
        changed = True
    return changed


ADAPTER = Adapter(
    "ag2",
    scopes=("openinference.instrumentation.ag2",),
    adapt=adapt,
    doc="tool arguments from `tool_call.function.arguments`; `[is_success, {content}]` "
    "outputs → the result, or the error when `is_success` is false",
)
