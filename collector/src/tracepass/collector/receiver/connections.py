"""Connection-level defences of the OTLP/HTTP receiver against slow or idle clients.

aiohttp reads request headers without a deadline and keeps any number of connections:
64 clients that send a few bytes and stall hold their sockets for as long as they like.
`ConnectionGuard` wraps aiohttp's protocol factory and

* refuses connections beyond `max_connections` with an immediate, retryable
  `503 Service Unavailable` + `Retry-After` (and closes them), so the file descriptors
  and buffers a flood can pin are bounded;
* closes a connection that has not produced a complete request (headers read, handler
  running) within `header_timeout_s` of opening, or of its previous response (a stalled
  keep-alive request). A connection whose handler is running is never cut here: the
  body has its own deadline in the handler, and ingestion may legitimately take time.

The in-flight slots of `ReceiverCore.admit()` are taken only once a body is complete
(see `http_server.py`), so a slow body costs a connection, never a slot.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from tracepass.evaluator.ratelimited_log import RateLimitedLog

__all__ = ["ConnectionGuard"]

_log = RateLimitedLog(logging.getLogger("tracepass.collector.receiver"))

_BUSY_RESPONSE = (
    b"HTTP/1.1 503 Service Unavailable\r\n"
    b"Retry-After: 1\r\n"
    b"Content-Type: text/plain\r\n"
    b"Content-Length: 28\r\n"
    b"Connection: close\r\n\r\n"
    b"too many open connections.\r\n"
)


class _Guarded(asyncio.Protocol):
    """Forwards every protocol callback to aiohttp's handler, adding the bookkeeping."""

    def __init__(self, guard: ConnectionGuard, inner: asyncio.Protocol) -> None:
        self.guard = guard
        self.inner = inner
        self.transport: asyncio.Transport | None = None
        self.active = 0  # requests whose handler is running
        self.timer: asyncio.TimerHandle | None = None
        self.admitted = False

    # --- asyncio.Protocol ------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        if not self.guard.admit(self):
            transport.write(_BUSY_RESPONSE)
            transport.close()
            return
        self.admitted = True
        self.inner.connection_made(transport)
        self.arm()

    def data_received(self, data: bytes) -> None:
        if self.admitted:
            self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received() if self.admitted else None

    def connection_lost(self, exc: Exception | None) -> None:
        self.disarm()
        if self.admitted:
            self.admitted = False
            self.guard.release(self)
            self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        if self.admitted:
            self.inner.pause_writing()

    def resume_writing(self) -> None:
        if self.admitted:
            self.inner.resume_writing()

    # --- header deadline -------------------------------------------------------------

    def arm(self) -> None:
        self.disarm()
        loop = asyncio.get_running_loop()
        self.timer = loop.call_later(self.guard.header_timeout_s, self._expire)

    def disarm(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _expire(self) -> None:
        self.timer = None
        if self.active == 0 and self.transport is not None:
            self.guard.timed_out += 1
            _log.warning(
                "header_timeout",
                "http connection closed: no complete request within %.0f s (%d so far)",
                self.guard.header_timeout_s,
                self.guard.timed_out,
            )
            self.transport.close()


class ConnectionGuard:
    def __init__(self, max_connections: int, header_timeout_s: float) -> None:
        self.max_connections = max_connections
        self.header_timeout_s = header_timeout_s
        self.open = 0
        self.refused = 0  # connections answered 503 for being over the limit
        self.timed_out = 0  # connections closed for not completing a request in time
        self._by_transport: dict[Any, _Guarded] = {}

    def factory(self, inner: Callable[[], asyncio.Protocol]) -> Callable[[], asyncio.Protocol]:
        return lambda: _Guarded(self, inner())

    def admit(self, conn: _Guarded) -> bool:
        if self.open >= self.max_connections:
            self.refused += 1
            _log.warning(
                "max_connections",
                "http connection refused with 503: %d connections open (limit %d; %d so far)",
                self.open,
                self.max_connections,
                self.refused,
            )
            return False
        self.open += 1
        self._by_transport[conn.transport] = conn
        return True

    def release(self, conn: _Guarded) -> None:
        self.open -= 1
        self._by_transport.pop(conn.transport, None)

    def request_started(self, transport: Any) -> None:
        conn = self._by_transport.get(transport)
        if conn is not None:
            conn.active += 1
            conn.disarm()

    def request_finished(self, transport: Any) -> None:
        conn = self._by_transport.get(transport)
        if conn is not None:
            conn.active -= 1
            if conn.active == 0 and conn.admitted:
                conn.arm()  # the next request on this keep-alive connection has a deadline
