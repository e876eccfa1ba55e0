"""The input and output JSON of observation-style conventions (Langfuse's
`langfuse.observation.input/output`, MLflow's `mlflow.spanInputs/spanOutputs`): one
reading of a turn's query and answer and of a model call's messages, shared by
`langfuse.py` and `mlflow_native.py` (each keeps only what its exporter does
differently).
"""

from __future__ import annotations

from typing import Any

from tracepass.collector.normalize.messages import (
    USER,
    answer_from_state,
    last_text,
    output_text,
    parse_messages,
    query_from_state,
    requested_tool_calls,
)
from tracepass.collector.records import NOT_JSON, loads
from tracepass.evaluator.models import ToolCall

__all__ = ["io_text", "model_io"]


def io_text(raw: Any, *, answer: bool, single_argument: bool = False) -> str | None:
    """A query / answer: plain text as it is, else read like chain state;
    `single_argument`: a query that is a call's only (text) argument is that text."""
    decoded = loads(raw)
    if decoded is NOT_JSON:
        return raw if isinstance(raw, str) and raw else None
    if isinstance(decoded, str):
        return decoded or None
    if single_argument and not answer and isinstance(decoded, dict) and len(decoded) == 1:
        (only,) = decoded.values()
        if isinstance(only, str):
            return only or None
    return answer_from_state(decoded) if answer else query_from_state(decoded)


def model_io(
    inputs: Any, outputs: Any
) -> tuple[str | None, str | None, tuple[ToolCall, ...] | None]:
    """(input text, output text, requested tool calls: None when the outputs hold no
    messages) of a model call whose decoded `inputs` are a message list or text and
    whose decoded `outputs` are messages (any shape `messages` reads) or text."""
    query = None
    if isinstance(inputs, list):
        query = last_text(parse_messages(inputs), USER)
    elif isinstance(inputs, str):
        query = inputs or None
    if isinstance(outputs, dict | list):
        messages = parse_messages(outputs)
        return query, output_text(messages), requested_tool_calls(messages)
    return query, (outputs or None) if isinstance(outputs, str) else None, None
