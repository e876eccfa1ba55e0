"""Semantic Kernel (native GenAI diagnostics, scopes `semantic_kernel.*`).

Kernel functions are offered to the model as `<plugin>-<function>` (Semantic Kernel's
fully qualified name; both parts are identifiers, so the first `-` separates them) and
its `execute_tool` spans carry that name. The tool is the function: the plugin prefix is
dropped from tool spans and from the calls model spans request, so references name
tools as the agent's code does.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tracepass.collector.normalize.registry import Adapter
from tracepass.collector.records import RecordKind, SpanRecord

SEPARATOR = "-"


def function_name(name: str) -> str:
    plugin, sep, function = name.partition(SEPARATOR)
    return function if sep and plugin and function else name


def adapt(rec: SpanRecord, attrs: dict[str, Any], span: Span) -> bool:
    if rec.kind is RecordKind.TOOL and rec.tool_name:
        plain = function_name(rec.tool_name)
        if plain != rec.tool_name:
            rec.tool_name = plain
            return True
    elif rec.kind is RecordKind.MODEL and rec.requested_tool_calls:
        calls = tuple(
            c.model_copy(update={"name": function_name(c.name)}) for c in rec.requested_tool_calls
        )
        if calls != rec.requested_tool_calls:
            rec.requested_tool_calls = calls
            return True
    return False


ADAPTER = Adapter(
    "semantic_kernel",
    scopes=("semantic_kernel",),
    adapt=adapt,
    doc="`<plugin>-<function>` tool names → the function name",
)
