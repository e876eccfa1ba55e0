"""Each reference's expected tools stored once (result row format 4), not in every row.

A scored turn carries its reference turn's expected tools (`TurnResult.expected_tools`,
the very tuple of the loaded reference: the evaluator hands it on). Written into every
result row they were about a third of the result's bytes (≈ 740 of ≈ 2,200 B for the
e2e bench's 3-turn, 12-call conversations) and of its encoding time (≈ 10 of ≈ 28 µs),
for data that only changes when the reference set does.

Since format 4 a result row names them by digest instead (`"tools":"<digest>"`, see
`codec.py`) and the table `reference_tools` (SQLite and PostgreSQL alike) holds the
list once: one entry per result turn, that turn's expected tools or null. The digest
is of the list's JSON text, so it is the same in every replica and for every revision
of a reference that expects the same tools, and never names two different lists.
Rows of this table are never updated or deleted (a few per reference-set version).

Encoding: `ReferenceTools.of(result)` finds a result's list by the identity of its
turns' tuples (the same objects for every conversation scored against a reference), so
a reference's list is serialized and hashed once per process, not once per result.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import TypeAdapter

from tracepass.evaluator.models import ConversationResult, ExpectedTool

__all__ = [
    "REFERENCE_TOOLS_SCHEMA",
    "ReferenceTools",
    "ToolsLookup",
    "ToolsRow",
    "ToolsSource",
    "sqlite_tools",
]

# The same DDL for both stores (TEXT is TEXT in SQLite and PostgreSQL).
REFERENCE_TOOLS_SCHEMA = """
CREATE TABLE IF NOT EXISTS reference_tools (digest TEXT PRIMARY KEY, tools TEXT NOT NULL);
"""

# Distinct lists kept per process: a list per reference (and per turn count seen for
# it); beyond this the oldest are dropped and re-encoded when seen again.
_ENCODED_MAX = 4096
_LOOKED_UP_MAX = 4096

_PER_TURN = TypeAdapter(list[tuple[ExpectedTool, ...] | None])


@dataclass(frozen=True, slots=True)
class ToolsRow:
    """One `reference_tools` row: the digest result rows name and the list's JSON."""

    digest: str
    tools: str


def tools_digest(tools: str) -> str:
    """The name of a list in `reference_tools` (SHA-256 of its JSON text, 32 hex digits:
    content-addressed, so replicas agree and distinct lists never share a name)."""
    return hashlib.sha256(tools.encode()).hexdigest()[:32]


class ReferenceTools:
    """The encode side: which `reference_tools` row a result's expected tools are."""

    def __init__(self) -> None:
        # Keyed by the identity of each turn's tuple; the value keeps the tuples alive,
        # so an id cannot be reused by another object while its key is here.
        self._encoded: OrderedDict[tuple[int, ...], tuple[tuple[Any, ...], ToolsRow]] = (
            OrderedDict()
        )

    def of(self, result: ConversationResult) -> ToolsRow | None:
        """The row holding `result`'s expected tools (None: no turn checks tools, the
        row then has nothing to leave out)."""
        per_turn = tuple(t.expected_tools for t in result.turns)
        if all(tools is None for tools in per_turn):
            return None
        key = tuple(map(id, per_turn))
        found = self._encoded.get(key)
        if found is not None:
            return found[1]
        text = _PER_TURN.dump_json(list(per_turn), exclude_defaults=True).decode()
        row = ToolsRow(tools_digest(text), text)
        self._encoded[key] = (per_turn, row)
        if len(self._encoded) > _ENCODED_MAX:
            self._encoded.popitem(last=False)
        return row


class ToolsSource(Protocol):
    """What a row's digest is resolved with: the stored list's JSON text, or None."""

    def __call__(self, digest: str) -> str | None: ...


class ToolsLookup:
    """The read side: a digest's list, parsed, fetched once per process (a digest's
    list never changes)."""

    def __init__(self, fetch: ToolsSource) -> None:
        self._fetch = fetch
        self._found: OrderedDict[str, list[Any]] = OrderedDict()

    def __call__(self, digest: str) -> list[Any]:
        """The per-turn list named `digest` (ValueError when the store lacks it)."""
        found = self._found.get(digest)
        if found is None:
            text = self._fetch(digest)
            if text is None:
                raise ValueError(f"stored result names expected tools {digest!r}, not stored")
            found = json.loads(text)
            if not isinstance(found, list):
                raise ValueError(f"expected tools {digest!r}: not a list")
            self._found[digest] = found
            if len(self._found) > _LOOKED_UP_MAX:
                self._found.popitem(last=False)
        return found


def sqlite_tools(execute: Callable[..., Any]) -> ToolsLookup:
    """A lookup reading `reference_tools` with `execute` (a SQLite connection's
    `execute`, or anything taking `(sql, args)` and returning a cursor)."""

    def fetch(digest: str) -> str | None:
        row = execute("SELECT tools FROM reference_tools WHERE digest=?", (digest,)).fetchone()
        return None if row is None else str(row[0])

    return ToolsLookup(fetch)
