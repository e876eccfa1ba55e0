"""Map spans and GenAI log events of every supported instrumentation convention to
`SpanRecord`s (the record itself is the foundation's: `tracepass.collector.records`).

`spans.py` normalizes trace export requests (the ingest hot path), `logs.py` log
records; one module per convention registered in `table.py`, `adapters/` one module
per framework. See docs/conventions.md for the mapping tables and how to add a
convention or adapter. This face only re-exports: import these names from here.
"""

from tracepass.collector.normalize.adapter_discovery import ADAPTERS
from tracepass.collector.normalize.anyvalue import any_value
from tracepass.collector.normalize.conversation_ids import (
    CONVERSATION_ID_KEYS,
    resolve_conversation_id,
)
from tracepass.collector.normalize.custom import CustomConventions
from tracepass.collector.normalize.genai_events import apply_events
from tracepass.collector.normalize.logs import event_of, normalize_logs_request
from tracepass.collector.normalize.messages import response_key
from tracepass.collector.normalize.registry import (
    ADAPTERS_ATTR,
    CONVENTION_ATTR,
    ROLE_ANSWER,
    ROLE_ATTR,
    ROLE_HANDOFF,
    RUN_IDS_ATTR,
    SOURCE_ATTRIBUTE,
    SOURCE_LOG,
    SOURCE_MODEL_REQUEST,
    SOURCES_ATTR,
    TOOL_RESPONSE_NAMES_ATTR,
    TOOL_RESPONSES_ATTR,
    source_of,
)
from tracepass.collector.normalize.spans import OtlpRequest, normalize_any, normalize_request
from tracepass.collector.normalize.stats import ReadTally
from tracepass.collector.normalize.usage import MAX_SPAN_DURATION_NS, model_of, timing_problem
from tracepass.collector.records import RecordKind, Rejection, SpanRecord

__all__ = [
    "ADAPTERS",
    "ADAPTERS_ATTR",
    "CONVENTION_ATTR",
    "CONVERSATION_ID_KEYS",
    "MAX_SPAN_DURATION_NS",
    "ROLE_ANSWER",
    "ROLE_ATTR",
    "ROLE_HANDOFF",
    "RUN_IDS_ATTR",
    "SOURCES_ATTR",
    "SOURCE_ATTRIBUTE",
    "SOURCE_LOG",
    "SOURCE_MODEL_REQUEST",
    "TOOL_RESPONSES_ATTR",
    "TOOL_RESPONSE_NAMES_ATTR",
    "CustomConventions",
    "OtlpRequest",
    "ReadTally",
    "RecordKind",
    "Rejection",
    "SpanRecord",
    "any_value",
    "apply_events",
    "event_of",
    "model_of",
    "normalize_any",
    "normalize_logs_request",
    "normalize_request",
    "resolve_conversation_id",
    "response_key",
    "source_of",
    "timing_problem",
]
