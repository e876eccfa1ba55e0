"""LangChain.js / LangGraph.js under OpenInference JS (`@arizeai/openinference-instrumentation-langchain`).

Its LLM spans flatten the output message's role and content
(`llm.output_messages.0.message.*`) but not the tool calls the model requested; those are
only in `output.value`, the JSON of LangChain's `{"generations": [[{"message": AIMessage}]]}`
(the message serialized as `{"lc": 1, "id": [..., "AIMessage"], "kwargs": {"tool_calls"}}`).
They are read from there, so a tool span that recorded a single argument as bare text
(`"Paris"`) takes its named arguments from the request (assembly, by call id).
"""

from __future__ import annotations

from typing import Any

from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tracepass.collector.normalize.messages import parse_message
from tracepass.collector.normalize.registry import Adapter
from tracepass.collector.records import RecordKind, SpanRecord, loads

OUTPUT = "output.value"


def _generation_message(raw: Any) -> Any:
    decoded = loads(raw)
    if not isinstance(decoded, dict):
        return None
    generations = decoded.get("generations")
    if not isinstance(generations, list) or not generations:
        return None
    last = generations[-1]
    if isinstance(last, list):  # one list of candidates per prompt
        last = last[-1] if last else None
    return last.get("message") if isinstance(last, dict) else None


def adapt(rec: SpanRecord, attrs: dict[str, Any], span: Span) -> bool:
    if rec.kind is not RecordKind.MODEL or rec.requested_tool_calls:
        return False
    raw = attrs.get(OUTPUT)
    if not isinstance(raw, str) or "tool_calls" not in raw:
        return False
    message = _generation_message(raw)
    parsed = parse_message(message) if message is not None else None
    if parsed is None or not parsed.tool_calls:
        return False
    rec.requested_tool_calls = parsed.tool_calls
    return True


ADAPTER = Adapter(
    "langchain_js",
    scopes=("@arizeai/openinference-instrumentation-langchain",),
    adapt=adapt,
    doc="model requests from the LLM span's `output.value` generations (the flattened "
    "output messages carry no tool calls)",
)
