"""Both OTLP receivers as one object with one lifecycle, sharing one `ReceiverCore`
(one in-flight budget, one set of counters)."""

from __future__ import annotations

import time
from collections.abc import Sequence

from aiohttp import web

from tracepass.collector.config import ReceiverConfig
from tracepass.collector.instruments import CollectorInstruments
from tracepass.collector.receiver.core import ReceiverCore
from tracepass.collector.receiver.fd_budget import connection_cap, raise_nofile_limit
from tracepass.collector.receiver.grpc_server import GrpcReceiver
from tracepass.collector.receiver.http_server import GetRoute, HttpReceiver
from tracepass.collector.receiver.memory import MemoryGuard
from tracepass.collector.receiver.sink import SpanSink

__all__ = ["ReceiverServers"]


class ReceiverServers:
    """`await start()` binds (port 0 picks an ephemeral port; read `grpc_port` /
    `http_port` afterwards); `await stop(grace_s)` refuses new exports with a retryable
    503/UNAVAILABLE, waits up to `grace_s` for running ones, then closes both ports."""

    def __init__(
        self,
        sink: SpanSink,
        instruments: CollectorInstruments,
        config: ReceiverConfig | None = None,
        *,
        extra_routes: Sequence[GetRoute] = (),
        memory: MemoryGuard | None = None,
    ) -> None:
        self.config = config or ReceiverConfig()
        self.core = ReceiverCore(sink, instruments, self.config, memory)
        # Per port, fitted under the file limit (raised to its hard value first).
        self.max_connections = connection_cap(self.config.max_connections, raise_nofile_limit())
        self._grpc = (
            GrpcReceiver(self.core, self.config, self.max_connections)
            if self.config.grpc_enabled
            else None
        )
        self._http = (
            HttpReceiver(self.core, self.config, extra_routes, self.max_connections)
            if self.config.http_enabled
            else None
        )
        self._started = False

    @property
    def http_app(self) -> web.Application | None:
        """The HTTP server's application: a later stage mounts its write routes on it
        before `start()` (`api/write_access.py`); None without the HTTP receiver."""
        return self._http.app if self._http is not None else None

    @property
    def grpc_port(self) -> int | None:
        return self._grpc.port if self._grpc is not None else None

    @property
    def http_port(self) -> int | None:
        return self._http.port if self._http is not None else None

    async def start(self) -> None:
        try:
            if self._grpc is not None:
                await self._grpc.start()
            if self._http is not None:
                await self._http.start()
        except BaseException:
            await self._close(0.0)
            raise
        self._started = True

    async def stop(self, grace_s: float = 5.0) -> None:
        deadline = time.monotonic() + grace_s
        await self.core.drain(grace_s)
        await self._close(max(deadline - time.monotonic(), 0.0))
        self._started = False

    async def _close(self, grace_s: float) -> None:
        if self._grpc is not None:
            await self._grpc.stop(grace_s)
        if self._http is not None:
            await self._http.stop()

    async def __aenter__(self) -> ReceiverServers:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
