"""MLflow tracing's own span attributes, as MLflow exports them over OTLP
(`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` set, `MLFLOW_ENABLE_OTEL_GENAI_SEMCONV` not): the
span type in `mlflow.spanType`, a span's inputs and outputs as JSON in `mlflow.spanInputs`
/ `mlflow.spanOutputs` (every value JSON-encoded, the type too: `"AGENT"`).

| `mlflow.spanType` | record | fields |
|---|---|---|
| `AGENT` | TURN | query: the inputs (text, a call's single argument, or chain state); answer: the outputs, read likewise; agent name: the span name |
| `CHAT_MODEL`, `LLM` | MODEL | input: last user message of the inputs' `messages`; output: the text and `tool_calls` of a chat-completions body's `choices[].message` (or any message shape `messages` reads) |
| `TOOL` | TOOL | name: `mlflow.spanFunctionName`, else the span name; arguments: the inputs; result: the outputs; error: status ERROR |
| anything else (`CHAIN`, `RETRIEVER`, …) | OTHER | |

Claimed by the attribute, whatever the scope. MLflow keeps the session
(`mlflow.trace.session`) in trace metadata, which the OTLP export does not carry; a
`session.id` attribute the application sets is read as everywhere.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tracepass.collector.normalize.extract import as_str
from tracepass.collector.normalize.messages import (
    USER,
    answer_from_state,
    last_text,
    output_text,
    parse_messages,
    query_from_state,
    requested_tool_calls,
)
from tracepass.collector.normalize.registry import Convention
from tracepass.collector.records import (
    NOT_JSON,
    RecordKind,
    SpanRecord,
    deferred_arguments,
    deferred_result,
    loads,
    store_tool_arguments,
    store_tool_result,
)

NAME = "mlflow"
SPAN_TYPE = "mlflow.spanType"
INPUTS = "mlflow.spanInputs"
OUTPUTS = "mlflow.spanOutputs"
FUNCTION_NAME = "mlflow.spanFunctionName"
_MODEL_TYPES = frozenset({"CHAT_MODEL", "LLM"})


def _text(raw: Any, *, answer: bool) -> str | None:
    """A query / answer: text as it is, a call's single argument, else chain state."""
    decoded = loads(raw)
    if decoded is NOT_JSON:
        return raw if isinstance(raw, str) and raw else None
    if isinstance(decoded, str):
        return decoded or None
    if not answer and isinstance(decoded, dict) and len(decoded) == 1:
        (only,) = decoded.values()
        if isinstance(only, str):
            return only or None
    return answer_from_state(decoded) if answer else query_from_state(decoded)


def _output_messages(outputs: Any) -> Any:
    """A chat-completions body's choice messages, else the outputs as they are."""
    if isinstance(outputs, dict) and isinstance(choices := outputs.get("choices"), list):
        return [c["message"] for c in choices if isinstance(c, dict) and "message" in c]
    return outputs


def _fill(rec: SpanRecord, attrs: dict[str, Any], marker: Any, span: Span) -> str | None:
    get = attrs.get
    kind = loads(marker) if isinstance(marker, str) else marker
    if kind == "AGENT":
        rec.kind = RecordKind.TURN
        rec.input_text = _text(get(INPUTS), answer=False)
        rec.output_text = _text(get(OUTPUTS), answer=True)
        if rec.agent_name is None:
            rec.agent_name = rec.name or None
    elif kind in _MODEL_TYPES:
        rec.kind = RecordKind.MODEL
        inputs = loads(get(INPUTS))
        if isinstance(inputs, dict):
            inputs = inputs.get("messages", inputs)
        if isinstance(inputs, list):
            rec.input_text = last_text(parse_messages(inputs), USER)
        elif isinstance(inputs, str):
            rec.input_text = inputs or None
        outputs = _output_messages(loads(get(OUTPUTS)))
        if isinstance(outputs, dict | list):
            messages = parse_messages(outputs)
            rec.output_text = output_text(messages)
            rec.requested_tool_calls = requested_tool_calls(messages)
        elif isinstance(outputs, str):
            rec.output_text = outputs or None
    elif kind == "TOOL":
        rec.kind = RecordKind.TOOL
        rec.tool_name = as_str(loads(get(FUNCTION_NAME))) or rec.name
        store_tool_arguments(rec, deferred_arguments(get(INPUTS)))
        store_tool_result(rec, deferred_result(get(OUTPUTS)))
    return NAME


CONVENTIONS = (
    Convention(
        NAME,
        keys=(SPAN_TYPE,),
        fill=_fill,
        doc="MLflow tracing spans (`mlflow.spanType`): AGENT → TURN, CHAT_MODEL / LLM → "
        "MODEL, TOOL → TOOL",
    ),
)
