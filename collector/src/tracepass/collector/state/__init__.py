"""Durable collector state: the SQLite store (one writer thread) and its codec."""

from tracepass.collector.state.codec import (
    StoredResult,
    decode_record,
    decode_result,
    encode_record,
    encode_request,
)
from tracepass.collector.state.failure_index import ModeScope
from tracepass.collector.state.index import ResultFilter, ResultRow, decode_cursor, encode_cursor
from tracepass.collector.state.outbox import Outbox, OutboxRow
from tracepass.collector.state.reference_tools import sqlite_tools
from tracepass.collector.state.results import ResultsStore
from tracepass.collector.state.review_labels import (
    ReadOnlyFile,
    ReviewLabel,
    ReviewLabels,
    ReviewStore,
)
from tracepass.collector.state.sqlite_results import ResultWrite
from tracepass.collector.state.store import (
    JOURNAL_RESULT,
    JOURNAL_WINDOW,
    JournalEntry,
    StateError,
    StateStore,
    StoredConversation,
)
from tracepass.collector.state.unusable import unusable_state

__all__ = [
    "JOURNAL_RESULT",
    "JOURNAL_WINDOW",
    "JournalEntry",
    "ModeScope",
    "Outbox",
    "OutboxRow",
    "ReadOnlyFile",
    "ResultFilter",
    "ResultRow",
    "ResultWrite",
    "ResultsStore",
    "ReviewLabel",
    "ReviewLabels",
    "ReviewStore",
    "StateError",
    "StateStore",
    "StoredConversation",
    "StoredResult",
    "decode_cursor",
    "decode_record",
    "decode_result",
    "encode_cursor",
    "encode_record",
    "encode_request",
    "sqlite_tools",
    "unusable_state",
]
