"""The span buffer: the write-ahead log of what was acknowledged, always the local file.

Every acknowledged span is here before its client hears "ok" (in `batch` durability:
the writer's group commit), which is what makes acknowledged spans survive `kill -9`;
restart recovery reads them back (`load`), and retention deletes them (`purge`).

- The ingest path (`write_request`) stores each export request once, as the protobuf
  bytes the client sent, plus its signal (traces, or logs carrying GenAI events) and
  its routing (which conversation each held record went to): one row per request
  instead of a JSON-encoded row per span, which made `batch` durability cost more CPU
  than normalization. Recovery decodes and normalizes those requests again
  (`load(normalize, normalize_logs)`). `request_keys` says which conversations still
  need a request row, so purging a conversation deletes the rows no one needs.
- Records without a request (`write_spans`: `ingest_records`, the clean shutdown of
  `none` durability) are stored as compact JSON arrays (`codec.py`).
- Which conversations were evaluated (revision, close time, spans seen) is read from the
  local `results` rows, which every results store keeps (`sqlite_results.py`).
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracepass.collector.records import SpanRecord
from tracepass.collector.state.codec import (
    decode_record,
    encode_record,
    encode_request,
    encode_routing,
)
from tracepass.collector.state.writer import SqliteFile
from tracepass.evaluator.ratelimited_log import RateLimitedLog

__all__ = ["Normalize", "NormalizeLogs", "SpanBuffer", "StoredConversation"]

log = logging.getLogger(__name__)
_rate_limited = RateLimitedLog(log)


def _apply_merges(conn: sqlite3.Connection, merges: Iterable[tuple[str, str]]) -> None:
    """A trace-only buffer joined its conversation: re-key what is stored under it."""
    for old, new in merges:
        conn.execute("UPDATE spans SET conv_key=? WHERE conv_key=?", (new, old))
        conn.execute(
            "INSERT OR IGNORE INTO request_keys SELECT ?, req_id FROM request_keys "
            "WHERE conv_key=?",
            (new, old),
        )
        conn.execute("DELETE FROM request_keys WHERE conv_key=?", (old,))
        conn.execute("INSERT INTO merges (old_key, new_key) VALUES (?,?)", (old, new))


Normalize = Callable[[ExportTraceServiceRequest], tuple[list[SpanRecord], Any]]
NormalizeLogs = Callable[[ExportLogsServiceRequest], tuple[list[SpanRecord], Any]]


@dataclass(frozen=True, slots=True)
class StoredConversation:
    """What restart recovery needs about one conversation with spans on disk."""

    key: str
    records: list[SpanRecord]
    last_seen: float
    # Set when the conversation was evaluated: its revision, close time and how many
    # spans that evaluation saw (more on disk now = late spans awaiting re-evaluation).
    revision: int | None = None
    closed_at: float | None = None
    evaluated_spans: int | None = None


class SpanBuffer:
    """The spans and requests of the state file `db`."""

    def __init__(self, db: SqliteFile) -> None:
        self.db = db

    async def write_spans(
        self,
        rows: Iterable[tuple[str, SpanRecord]],
        received_at: float,
        merges: Iterable[tuple[str, str]] = (),
    ) -> None:
        """Insert new records (dedupe by trace+span id) and re-key merged buffers."""
        rows = list(rows)
        merges = list(merges)

        def op(conn: sqlite3.Connection) -> None:
            _apply_merges(conn, merges)
            conn.executemany(
                "INSERT OR IGNORE INTO spans VALUES (?,?,?,?,?)",
                [(r.trace_id, r.span_id, key, received_at, encode_record(r)) for key, r in rows],
            )

        await self.db.run(op)

    async def write_request(
        self,
        request: ExportTraceServiceRequest | ExportLogsServiceRequest,
        keys: Sequence[str | None],
        received_at: float,
        merges: Iterable[tuple[str, str]] = (),
    ) -> None:
        """Store one export request as received plus its routing: `keys[i]` is the
        conversation holding the normalizer's i-th record (`AddOutcome.keys`), None for
        records assembly did not hold (dropped), which recovery skips."""
        merges = list(merges)
        signal = "logs" if isinstance(request, ExportLogsServiceRequest) else "traces"

        def op(conn: sqlite3.Connection) -> None:
            # Serialized here, on the writer thread: the event loop only waits.
            slots: dict[str, int] = {}
            index = [-1 if k is None else slots.setdefault(k, len(slots)) for k in keys]
            _apply_merges(conn, merges)
            routing = encode_routing([list(slots), index, merges])
            cur = conn.execute(
                "INSERT INTO requests (received_at, data, routing, signal) VALUES (?,?,?,?)",
                (received_at, encode_request(request), routing, signal),
            )
            req_id = cur.lastrowid
            conn.executemany(
                "INSERT OR IGNORE INTO request_keys VALUES (?,?)", [(k, req_id) for k in slots]
            )

        await self.db.run(op)

    def load(
        self, normalize: Normalize | None = None, normalize_logs: NormalizeLogs | None = None
    ) -> list[StoredConversation]:
        """Every conversation with spans on disk (blocking; call before serving).

        Stored records are read first, then the request log is replayed in arrival
        order with `normalize` / `normalize_logs` (the normalizers that produced the
        records from trace / logs requests): each record
        goes to the conversation it was routed to, renamed by later trace merges, and
        only while that conversation still needs the request (not purged). Without
        `normalize` the request log is not read."""
        meta = {
            row[0]: (int(row[1]), float(row[2]), int(row[3]))
            for row in self.db.reader.execute(
                "SELECT conv_key, revision, closed_at, n_spans FROM results WHERE purged=0"
            )
        }
        groups: dict[str, dict[tuple[str, str], SpanRecord]] = {}
        last: dict[str, float] = {}
        bad = 0
        for conv_key, received_at, data in self.db.reader.execute(
            "SELECT conv_key, received_at, data FROM spans"
        ):
            try:
                rec = decode_record(data)
            except (ValueError, TypeError, IndexError) as exc:
                bad += 1
                _rate_limited.error(
                    "bad_row",
                    "%s: undecodable span row in %s skipped: %s",
                    self.db.path,
                    conv_key,
                    exc,
                )
                continue
            groups.setdefault(conv_key, {}).setdefault((rec.trace_id, rec.span_id), rec)
            last[conv_key] = max(last.get(conv_key, 0.0), float(received_at))
        if normalize is not None:
            bad += self._replay(normalize, normalize_logs, groups, last)
        if bad:
            log.error("%s: %d stored spans could not be decoded", self.db.path, bad)
        out: list[StoredConversation] = []
        for key in sorted(groups):
            records = list(groups[key].values())
            if not records:
                continue
            m = meta.get(key)
            out.append(
                StoredConversation(
                    key,
                    records,
                    last[key],
                    revision=m[0] if m else None,
                    closed_at=m[1] if m else None,
                    evaluated_spans=m[2] if m else None,
                )
            )
        return out

    def _replay(
        self,
        normalize: Normalize,
        normalize_logs: NormalizeLogs | None,
        groups: dict[str, dict[tuple[str, str], SpanRecord]],
        last: dict[str, float],
    ) -> int:
        alias: dict[str, str] = {}
        for old, new in self.db.reader.execute("SELECT old_key, new_key FROM merges ORDER BY seq"):
            alias[old] = new

        def resolve(key: str) -> str:
            for _ in range(64):  # merge chains are short; a cycle must not hang recovery
                nxt = alias.get(key)
                if nxt is None or nxt == key:
                    break
                key = nxt
            return key

        live = set(self.db.reader.execute("SELECT conv_key, req_id FROM request_keys"))
        bad = 0
        for req_id, received_at, data, routing, signal in self.db.reader.execute(
            "SELECT id, received_at, data, routing, signal FROM requests ORDER BY id"
        ):
            try:
                records, keys, index = _normalize_stored(
                    data, routing, signal, normalize, normalize_logs
                )
            except Exception as exc:  # a bad row must not stop recovery of the others
                bad += _routed_count(routing)
                _rate_limited.error(
                    "bad_request", "%s: stored request %d skipped: %s", self.db.path, req_id, exc
                )
                continue
            current = [resolve(k) for k in keys]
            for rec, i in zip(records, index, strict=True):
                if i < 0:
                    continue
                key = current[i]
                if (key, req_id) not in live and (keys[i], req_id) not in live:
                    continue  # that conversation was purged; the row stays for others
                groups.setdefault(key, {}).setdefault((rec.trace_id, rec.span_id), rec)
                if received_at > last.get(key, 0.0):
                    last[key] = float(received_at)
        return bad

    async def read_back(
        self,
        keys: Collection[str],
        normalize: Normalize,
        normalize_logs: NormalizeLogs | None = None,
    ) -> dict[str, list[SpanRecord]]:
        """The records held for the conversations `keys` (evaluated ones are kept until
        `retention_s` after evaluation, `purge`): what `load` would restore for them,
        read when a late span arrives for one (`assembly/retention.py`). Read through the
        writer, so requests acknowledged before this call are seen even if their commit
        is still pending; decoded and normalized by the caller's thread."""
        wanted = list(keys)

        def op(conn: sqlite3.Connection) -> list[tuple[str, set[str], list[Any], list[Any]]]:
            return [(key, *_stored_rows(conn, key)) for key in wanted]

        out: dict[str, list[SpanRecord]] = {}
        for key, aliases, spans, requests in await self.db.run(op):
            found: dict[tuple[str, str], SpanRecord] = {}
            for (data,) in spans:
                try:
                    rec = decode_record(data)
                except (ValueError, TypeError, IndexError) as exc:
                    _rate_limited.error(
                        "bad_row", "%s: undecodable span row in %s: %s", self.db.path, key, exc
                    )
                    continue
                found.setdefault((rec.trace_id, rec.span_id), rec)
            for req_id, data, routing, signal in requests:
                try:
                    records, routed, index = _normalize_stored(
                        data, routing, signal, normalize, normalize_logs
                    )
                except Exception as exc:  # one bad row must not lose the others
                    _rate_limited.error(
                        "bad_request",
                        "%s: stored request %d skipped: %s",
                        self.db.path,
                        req_id,
                        exc,
                    )
                    continue
                for rec, i in zip(records, index, strict=True):
                    if i >= 0 and routed[i] in aliases:
                        found.setdefault((rec.trace_id, rec.span_id), rec)
            out[key] = list(found.values())
        return out

    def request_count(self) -> int:
        return int(self.db.reader.execute("SELECT count(*) FROM requests").fetchone()[0])

    def span_count(self) -> int:
        return int(self.db.reader.execute("SELECT count(*) FROM spans").fetchone()[0])

    def span_ids(self) -> set[tuple[str, str]]:
        return {(t, s) for t, s in self.db.reader.execute("SELECT trace_id, span_id FROM spans")}

    async def purge(self, closed_before: float, keep: Collection[str] = ()) -> int:
        """Delete spans of conversations evaluated before `closed_before` (past retention),
        except `keep` (re-opened by late spans)."""
        keep_set = set(keep)

        def op(conn: sqlite3.Connection) -> int:
            keys = [
                k
                for (k,) in conn.execute(
                    "SELECT conv_key FROM results WHERE purged=0 AND closed_at < ?",
                    (closed_before,),
                )
                if k not in keep_set
            ]
            n = 0
            for k in keys:
                n += _delete_conversation(conn, k)
                conn.execute("UPDATE results SET purged=1 WHERE conv_key=?", (k,))
            return n

        return await self.db.run(op)

    async def discard(self, key: str) -> int:
        """Delete a conversation's stored spans without a result (sampled out at
        completion): it will not be evaluated, so nothing may restore it."""
        return await self.db.run(lambda conn: _delete_conversation(conn, key))


def _delete_conversation(conn: sqlite3.Connection, key: str) -> int:
    """Delete one conversation's spans, its request links, merges into it, and the
    request rows no other conversation needs; returns the number of span rows deleted."""
    n = conn.execute("DELETE FROM spans WHERE conv_key=?", (key,)).rowcount
    req_ids = [
        r for (r,) in conn.execute("SELECT req_id FROM request_keys WHERE conv_key=?", (key,))
    ]
    conn.execute("DELETE FROM request_keys WHERE conv_key=?", (key,))
    conn.execute("DELETE FROM merges WHERE new_key=?", (key,))
    # A request row goes once no conversation needs it any more.
    conn.executemany(
        "DELETE FROM requests WHERE id=? AND NOT EXISTS (SELECT 1 FROM request_keys WHERE req_id=?)",
        [(r, r) for r in req_ids],
    )
    return n


def _stored_rows(conn: sqlite3.Connection, key: str) -> tuple[set[str], list[Any], list[Any]]:
    """What the file holds for conversation `key`: the keys merged into it (its
    records may be routed under those in a request stored before the merge), its span
    rows and the requests it needs, in arrival order."""
    aliases = {key}
    frontier = [key]
    while frontier and len(aliases) < 10_000:  # merge chains are short; never hang
        new = frontier.pop()
        for (old,) in conn.execute("SELECT old_key FROM merges WHERE new_key=?", (new,)):
            if old not in aliases:
                aliases.add(old)
                frontier.append(old)
    spans = conn.execute("SELECT data FROM spans WHERE conv_key=?", (key,)).fetchall()
    requests = conn.execute(
        "SELECT r.id, r.data, r.routing, r.signal FROM request_keys k "
        "JOIN requests r ON r.id = k.req_id WHERE k.conv_key=? ORDER BY r.id",
        (key,),
    ).fetchall()
    return aliases, spans, requests


def _normalize_stored(
    data: bytes,
    routing: str,
    signal: str,
    normalize: Normalize,
    normalize_logs: NormalizeLogs | None,
) -> tuple[list[SpanRecord], list[str], list[int]]:
    """A stored request's records and routing: (records, conversation keys, per record
    the index of its key or -1). Raises ValueError when it cannot be read back."""
    keys, index, _ = json.loads(routing)
    if signal == "logs":
        if normalize_logs is None:
            raise ValueError("a logs request, and no logs normalizer to read it")
        records, _rejected = normalize_logs(ExportLogsServiceRequest.FromString(data))
    elif signal == "traces":
        records, _rejected = normalize(ExportTraceServiceRequest.FromString(data))
    else:
        raise ValueError(f"unknown signal {signal!r}")
    if len(records) != len(index):
        raise ValueError(
            f"{len(records)} records normalized, {len(index)} routed "
            "(normalizer changed since the request was stored?)"
        )
    return records, keys, index


def _routed_count(routing: str) -> int:
    """How many records a stored request routed (what a bad row loses), 1 if unknown."""
    try:
        index = json.loads(routing)[1]
    except (ValueError, TypeError, IndexError, KeyError):
        return 1
    return len(index) if isinstance(index, list) else 1
