"""What every pooled PostgreSQL connection of the results store gets (`postgres.py`).

- **Text PostgreSQL can hold.** PostgreSQL refuses U+0000 in `text` (and `jsonb`)
  values, and one such value used to fail the whole outbox batch holding it, retried
  forever (issue 33). A span may put NUL anywhere (a conversation id, an agent name, a
  tool name that becomes a failure signature). Every `str` parameter sent on these
  connections has U+0000 replaced with U+FFFD (the replacement character): the row is
  stored, and a lookup with the same id finds it (the lookup is cleaned the same way).
  The views are JSON text, which escapes NUL itself (`\\u0000`): they keep the original.
  The API refuses NUL in a filter (400, `api/params.py`) before any query.
- **A deadline the client enforces.** `statement_timeout` is the server's: a server
  that is stopped (SIGSTOP) or a network that swallows packets never answers, and
  libpq waits forever (TCP keepalives are answered by the kernel). `Deadlines` runs
  one watchdog thread; a read or write arms a deadline for its thread before the
  checkout (the pool's connection check runs under it too) and disarms it when done.
  When a deadline passes, the watchdog shuts the connection's socket down: the blocked
  call returns at once with an `OperationalError` (the store answers
  `ResultsUnavailable`, the API 503 naming the database) and the pool replaces the
  connection.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.types.string import StrBinaryDumper, StrDumper, StrDumperUnknown

__all__ = ["Deadlines", "clean_text", "nul_safe"]

_NUL = "\x00"
_REPLACEMENT = "\ufffd"


def clean_text(value: str) -> str:
    """`value` as PostgreSQL stores it: U+0000 → U+FFFD."""
    return value.replace(_NUL, _REPLACEMENT) if _NUL in value else value


class _NulSafeUnknown(StrDumperUnknown):
    def dump(self, obj: str) -> Any:
        return super().dump(clean_text(obj))


class _NulSafeText(StrDumper):
    def dump(self, obj: str) -> Any:
        return super().dump(clean_text(obj))


class _NulSafeBinary(StrBinaryDumper):
    def dump(self, obj: str) -> Any:
        return super().dump(clean_text(obj))


def nul_safe(conn: psycopg.Connection[Any]) -> None:
    """Make `conn` send every `str` parameter without U+0000 (the pool's `configure`)."""
    adapters = conn.adapters
    adapters.register_dumper(str, _NulSafeUnknown)  # the default for a `%s` str
    adapters.register_dumper(str, _NulSafeText)  # text oid (arrays of str)
    adapters.register_dumper(str, _NulSafeBinary)  # `%b`


@dataclass(slots=True)
class _Armed:
    at: float  # time.monotonic() after which the connection is cut
    conn: psycopg.Connection[Any] | None = None
    fired: bool = False


def _cut(conn: psycopg.Connection[Any]) -> None:
    """Shut `conn`'s socket down (both ways) without closing its descriptor, which
    libpq still owns: a recv/poll blocked on it returns at once."""
    with contextlib.suppress(Exception):
        fd = os.dup(conn.pgconn.socket)
        sock = socket.socket(fileno=fd)
        try:
            sock.shutdown(socket.SHUT_RDWR)
        finally:
            sock.close()


class Deadlines:
    """Per-thread deadlines on pooled connections, enforced by one watchdog thread."""

    def __init__(self, name: str = "tracepass-pg-deadline") -> None:
        self.name = name
        self.cut = 0  # connections cut at their deadline (this process)
        self._cond = threading.Condition()
        self._armed: dict[int, _Armed] = {}
        self._thread: threading.Thread | None = None

    @contextlib.contextmanager
    def within(self, seconds: float) -> Iterator[_Armed]:
        """Arm a deadline `seconds` from now for this thread's connection (set by
        `attach`); re-entering keeps the earlier deadline."""
        key = threading.get_ident()
        with self._cond:
            outer = self._armed.get(key)
            if outer is None:
                armed = _Armed(time.monotonic() + seconds)
                self._armed[key] = armed
                if self._thread is None:
                    self._thread = threading.Thread(target=self._watch, name=self.name, daemon=True)
                    self._thread.start()
                self._cond.notify()
        if outer is not None:  # nested: the outer deadline stands
            yield outer
            return
        try:
            yield armed
        finally:
            with self._cond:
                self._armed.pop(key, None)

    def attach(self, conn: psycopg.Connection[Any]) -> None:
        """`conn` is the one this thread's deadline guards (cut now if it has passed)."""
        with self._cond:
            armed = self._armed.get(threading.get_ident())
            if armed is None:
                return
            armed.conn = conn
            if armed.fired or time.monotonic() >= armed.at:
                armed.fired = True
                self.cut += 1
                _cut(conn)

    def _watch(self) -> None:
        with self._cond:
            while True:
                now = time.monotonic()
                pending = [a for a in self._armed.values() if not a.fired]
                for armed in pending:
                    if armed.at <= now:
                        armed.fired = True
                        if armed.conn is not None:
                            self.cut += 1
                            _cut(armed.conn)
                waits = [a.at - now for a in pending if not a.fired]
                self._cond.wait(timeout=min(waits) if waits else None)
