"""The foundation every stage shares: `SpanRecord`, the one shape assembly sees, and
the decoding its deferred tool arguments and results need when read.

normalize builds records; assembly, state and the pipeline read them. So the record,
what it keeps of a model call (`ModelUsage`), the coercion of tool arguments and
results (`tool_values.py`, applied at ingest or deferred to the first read), and the
lenient JSON and Python-repr readers those use (`jsonvalue.py`, `pyrepr.py`) live below
every stage (CONTRIBUTING.md, "Layout and data flow"), not inside the one that builds
them. Import these names from here.
"""

from tracepass.collector.records import pyrepr
from tracepass.collector.records.jsonvalue import (
    MAX_JSON_DEPTH,
    NOT_JSON,
    SCAN_ERRORS,
    loads,
    maybe_deep,
    scan_once,
)
from tracepass.collector.records.model_usage import ModelUsage
from tracepass.collector.records.span_record import (
    RecordKind,
    Rejection,
    SpanRecord,
    store_tool_arguments,
    store_tool_result,
    stored_tool_arguments,
    stored_tool_result,
)
from tracepass.collector.records.tool_values import (
    RAW_KEY,
    DeferredResult,
    coerce_arguments,
    coerce_result,
    decode_deferred_arguments,
    decode_deferred_result,
    deferred_arguments,
    deferred_result,
    tool_call_id_from_result,
)

__all__ = [
    "MAX_JSON_DEPTH",
    "NOT_JSON",
    "RAW_KEY",
    "SCAN_ERRORS",
    "DeferredResult",
    "ModelUsage",
    "RecordKind",
    "Rejection",
    "SpanRecord",
    "coerce_arguments",
    "coerce_result",
    "decode_deferred_arguments",
    "decode_deferred_result",
    "deferred_arguments",
    "deferred_result",
    "loads",
    "maybe_deep",
    "pyrepr",
    "scan_once",
    "store_tool_arguments",
    "store_tool_result",
    "stored_tool_arguments",
    "stored_tool_result",
    "tool_call_id_from_result",
]
