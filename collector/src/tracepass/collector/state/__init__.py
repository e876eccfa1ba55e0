"""Durable collector state: the SQLite store (one writer thread) and its codec."""

from tracepass.collector.state.codec import (
    StoredResult,
    decode_record,
    encode_record,
    encode_request,
)
from tracepass.collector.state.results import ResultsStore
from tracepass.collector.state.sqlite_results import ResultWrite
from tracepass.collector.state.store import (
    JOURNAL_RESULT,
    JOURNAL_WINDOW,
    JournalEntry,
    StateError,
    StateStore,
    StoredConversation,
)

__all__ = [
    "JOURNAL_RESULT",
    "JOURNAL_WINDOW",
    "JournalEntry",
    "ResultWrite",
    "ResultsStore",
    "StateError",
    "StateStore",
    "StoredConversation",
    "StoredResult",
    "decode_record",
    "encode_record",
    "encode_request",
]
