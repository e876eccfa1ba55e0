"""Grafana's agent observability SDK `agento11y` (scope `github.com/grafana/sigil/…`), with
its framework handlers (LangGraph, LangChain, OpenAI Agents, …).

What it writes, and what this adapter makes of it:

* Every span is the root of its own trace (the SDK starts each one detached); the turn
  structure is in `agento11y.framework.run_id` / `parent_run_id` (on the framework
  spans, and inside the JSON `agento11y.generation.metadata` of `protocol="otel"` model
  spans). Both ids are kept on the record (`RUN_IDS_ATTR`) so assembly can re-link the
  spans of one run (assembly/runs.py); tool spans carry no run id and join the turn
  they ran in by start order (a continuation, see build.py).
* The framework's root chain (`framework_chain` without a parent run) is the turn; its
  nested chains stay OTHER.
* Model calls are `generateText` / `streamText` spans (read as GenAI chat spans); in
  `protocol="otel"` they are `chat` spans whose output tool calls carry their arguments
  only base64-encoded (`agento11y.arguments_b64`): decoded here.
* A hand-off (`run_type=handoff`, OpenAI Agents) is a hand-off step (`ROLE_HANDOFF`).

In its default mode (and `FULL`) the SDK sends messages to Grafana's own generation
ingest, not to OTLP: no span carries the query, the answer or the model's requests
(documented in docs/conventions.md; `tracepass inspect` reports the missing fields).
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tracepass.collector.normalize import genai
from tracepass.collector.normalize.registry import (
    ROLE_ATTR,
    ROLE_HANDOFF,
    RUN_IDS_ATTR,
    Adapter,
)
from tracepass.collector.records import RecordKind, SpanRecord, coerce_arguments, loads

OPERATION = "gen_ai.operation.name"
RUN_ID = "agento11y.framework.run_id"
PARENT_RUN_ID = "agento11y.framework.parent_run_id"
RUN_TYPE = "agento11y.framework.run_type"
GENERATION_METADATA = "agento11y.generation.metadata"
ARGUMENTS_B64 = "agento11y.arguments_b64"
MODEL_OPERATIONS = frozenset({"generateText", "streamText"})
CHAIN_OPERATION = "framework_chain"
HANDOFF = "handoff"
MISSING_CONTENT_HINT = (
    "agento11y sends message content to Grafana's generation ingest, not to OTLP (its "
    "default grpc/http protocol, in every capture mode): switch the client to "
    'protocol="otel" (AGENTO11Y_PROTOCOL=otel with '
    "AGENTO11Y_ENABLE_EXPERIMENTAL_FEATURES=true) for queries, answers and model requests"
)
# Base64 arguments larger than this are left encoded (kept as they are).
MAX_B64_CHARS = 1 << 20


def _run_ids(attrs: dict[str, Any]) -> tuple[str | None, str | None]:
    run_id = attrs.get(RUN_ID)
    parent = attrs.get(PARENT_RUN_ID)
    if run_id is None and GENERATION_METADATA in attrs:
        metadata = loads(attrs[GENERATION_METADATA])
        if isinstance(metadata, dict):
            run_id = metadata.get(RUN_ID)
            parent = metadata.get(PARENT_RUN_ID)
    return (
        run_id if isinstance(run_id, str) and run_id else None,
        parent if isinstance(parent, str) and parent else None,
    )


def decoded_arguments(raw_output: Any) -> dict[str, dict[str, Any]]:
    """{call id: arguments} of the output tool calls that carry `agento11y.arguments_b64`."""
    messages = loads(raw_output)
    found: dict[str, dict[str, Any]] = {}
    if not isinstance(messages, list):
        return found
    for message in messages:
        parts = message.get("parts") if isinstance(message, dict) else None
        for part in parts if isinstance(parts, list) else ():
            if not isinstance(part, dict) or part.get("type") != "tool_call":
                continue
            encoded, call_id = part.get(ARGUMENTS_B64), part.get("id")
            if not isinstance(encoded, str) or not isinstance(call_id, str):
                continue
            if len(encoded) > MAX_B64_CHARS:
                continue
            try:
                text = base64.b64decode(encoded, validate=True).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError):
                continue
            found[call_id] = coerce_arguments(text)
    return found


def _decode_requests(rec: SpanRecord, attrs: dict[str, Any]) -> bool:
    raw = attrs.get(genai.OUTPUT_MESSAGES)
    if not rec.requested_tool_calls or not isinstance(raw, str) or ARGUMENTS_B64 not in raw:
        return False
    decoded = decoded_arguments(raw)
    if not decoded:
        return False
    rec.requested_tool_calls = tuple(
        c.model_copy(update={"arguments": decoded[c.call_id]})
        if not c.arguments and c.call_id in decoded
        else c
        for c in rec.requested_tool_calls
    )
    return True


def adapt(rec: SpanRecord, attrs: dict[str, Any], span: Span) -> bool:
    operation = attrs.get(OPERATION)
    changed = False
    if operation in MODEL_OPERATIONS and rec.kind is RecordKind.OTHER:
        genai.fill_model(rec, attrs)
        changed = True
    run_id, parent = _run_ids(attrs)
    if operation == CHAIN_OPERATION:
        run_type = attrs.get(RUN_TYPE)
        if run_type == HANDOFF:
            rec.attributes[ROLE_ATTR] = ROLE_HANDOFF
            changed = True
        elif parent is None and rec.kind is RecordKind.OTHER:
            genai.fill_turn(rec, attrs)  # the run's root chain: the turn
            changed = True
    if rec.kind is RecordKind.MODEL:
        changed = _decode_requests(rec, attrs) or changed
    if run_id is not None:
        # A list: never entered into the shared kept-attribute dicts (unique per span).
        rec.attributes[RUN_IDS_ATTR] = [run_id, parent]
        changed = True
    return changed


ADAPTER = Adapter(
    "agento11y",
    scopes=("github.com/grafana/sigil",),
    adapt=adapt,
    doc="run ids kept for re-linking its detached spans; root chain → turn; "
    "generateText/streamText → model call; base64 tool-call arguments decoded; "
    "run_type=handoff → hand-off",
    missing_content_hint=MISSING_CONTENT_HINT,
)
