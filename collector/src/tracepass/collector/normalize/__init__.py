"""Map spans and GenAI log events of every supported instrumentation convention to
`SpanRecord`s (the record itself is the foundation's: `tracepass.collector.records`).

`spans.py` normalizes trace export requests (the ingest hot path), `logs.py` log
records; one module per convention registered in `table.py`, `adapters/` one module
per framework. See docs/conventions.md for the mapping tables and how to add a
convention or adapter. This face only re-exports: import these names from here.
"""

from tracepass.collector.normalize.adapter_discovery import ADAPTERS
from tracepass.collector.normalize.conversation_ids import (
    CONVERSATION_ID_KEYS,
    resolve_conversation_id,
)
from tracepass.collector.normalize.custom import CustomConventions
from tracepass.collector.normalize.logs import normalize_logs_request
from tracepass.collector.normalize.registry import CONVENTION_ATTR
from tracepass.collector.normalize.spans import OtlpRequest, normalize_any, normalize_request
from tracepass.collector.normalize.stats import ReadTally
from tracepass.collector.records import RecordKind, Rejection, SpanRecord

__all__ = [
    "ADAPTERS",
    "CONVENTION_ATTR",
    "CONVERSATION_ID_KEYS",
    "CustomConventions",
    "OtlpRequest",
    "ReadTally",
    "RecordKind",
    "Rejection",
    "SpanRecord",
    "normalize_any",
    "normalize_logs_request",
    "normalize_request",
    "resolve_conversation_id",
]
