"""Evaluated conversations' records in a compact, untracked form while they are retained.

Why: after evaluation a conversation's records are kept for `assembly.retention_s` (1 h
by default) in case a late span arrives and the conversation must be evaluated again.
As live objects (a `SpanRecord` of 23 slots, its strings, its attribute dict) they cost
≈ 800 bytes per span and every full garbage collection scans them: at a steady rate RSS
climbed until `max_buffered_spans` and a full collection over 1M records paused for
hundreds of ms. Packed, a retained conversation is one `bytes` object (invisible to the
GC) holding the records' slot values, unpacked only when a late span, a view or the end
of retention needs them.

In-process only, never written anywhere (the state file has its own codec): `pickle` is
safe here because the bytes come from this process. The slots are read raw
(`stored_tool_arguments` / `stored_tool_result`), so deferred tool arguments and results
stay text and unpacking gives records equal to the originals (tested).
"""

from __future__ import annotations

import marshal
import pickle
from collections.abc import Iterable
from operator import attrgetter

from tracepass.collector.records import (
    DeferredResult,
    RecordKind,
    SpanRecord,
    stored_tool_arguments,
    stored_tool_result,
)

__all__ = ["pack_records", "unpack_records"]

_FIELDS: tuple[str, ...] = SpanRecord.__slots__
_SPECIAL = ("kind", "tool_arguments", "tool_result")
_PLAIN = tuple(name for name in _FIELDS if name not in _SPECIAL)
_plain = attrgetter(*_PLAIN)  # one C call per record
_KINDS = {kind.value: kind for kind in RecordKind}
_CODES = {kind: kind.value for kind in RecordKind}  # `.value` is a slow descriptor
_MARSHAL = b"M"  # rows of builtins only (the common case: fast, compact)
_PICKLE = b"P"  # rows holding models (requested tool calls, tool definitions)


_models = attrgetter("requested_tool_calls", "tool_definitions")
_NO_MODELS = ((), None)
_kind = attrgetter("kind")


def pack_records(records: Iterable[SpanRecord]) -> bytes:
    """The records' raw slot values as one bytes object (strings shared between
    records, e.g. a trace's id, are written once).

    Column by column, each read by `map` over a C getter (a Python loop over the
    records cost ≈ 2.7 us per span): the other fields' tuples, the kinds' values, the
    raw arguments, the raw results with each deferred result replaced by its text and
    their positions. Builtins only unless a record holds model objects, so `marshal`
    (C, no per-object class lookups: ≈ 3x faster than `pickle` here) writes it;
    otherwise `pickle` does."""
    recs = records if isinstance(records, list) else list(records)
    results = list(map(stored_tool_result, recs))
    deferred = [i for i, v in enumerate(results) if v.__class__ is DeferredResult]
    for i in deferred:
        results[i] = results[i].text
    columns = (
        list(map(_CODES.__getitem__, map(_kind, recs))),
        list(map(stored_tool_arguments, recs)),
        results,
        deferred,
        list(map(_plain, recs)),
    )
    if all(m == _NO_MODELS for m in map(_models, recs)):
        try:
            return _MARSHAL + marshal.dumps(columns)
        except ValueError:  # a value marshal cannot write (e.g. an odd attribute type)
            pass
    return _PICKLE + pickle.dumps(columns, protocol=pickle.HIGHEST_PROTOCOL)


def unpack_records(packed: bytes) -> list[SpanRecord]:
    """The records `pack_records` packed, equal to them and in the same order."""
    body = memoryview(packed)[1:]
    # pickle: only ever bytes this process packed (never read from outside).
    kinds, args, results, deferred, rows = (
        marshal.loads(body) if packed[:1] == _MARSHAL else pickle.loads(body)
    )
    for i in deferred:
        results[i] = DeferredResult(results[i])
    return [
        SpanRecord(
            kind=_KINDS[kind],
            tool_arguments=arg,
            tool_result=result,
            **dict(zip(_PLAIN, rest, strict=True)),
        )
        for kind, arg, result, rest in zip(kinds, args, results, rows, strict=True)
    ]
