"""OTLP/gRPC `TraceService/Export` and `LogsService/Export` on one grpc.aio server.

Both services are the same handler bound to a different `Signal` (see `signals.py`).

The method is registered with no request deserializer so the handler sees raw bytes:
that way a malformed message becomes INVALID_ARGUMENT with a located error instead of
grpc's opaque deserialization failure.

The size cap is `grpc.max_receive_message_length`, which grpc enforces on the
*decompressed* message (a gzip bomb stops at the cap inside grpc). A unary handler would
never run for such a message, so the refusal would escape `tracepass_export_requests`.
The method is therefore registered as client-streaming: wire-compatible with the unary
call every OTLP exporter makes, but the handler starts before the message is read, and
a request whose one message never arrives is one grpc refused — counted as `too_large`.

Connections and calls are bounded like HTTP's (1,100 idle TCP connections once
exhausted the file limit and 20,000 idle streams added ≈ 400 MB): at most
`max_connections` connections (grpc closes the rest at once), a handshake within
`header_timeout_s`, `grpc_max_concurrent_streams` calls per connection, a connection
without calls closed after `grpc_idle_timeout_s`, and at most `max_connections` calls
waiting for their message at a time (more: RESOURCE_EXHAUSTED, counted `overloaded`).
Under a memory cap, a call reserves `max_request_bytes` until its message is in (grpc
buffers a message before the handler sees it, so its size is not known earlier), then
the message's size until it is answered (`memory.py`); a reservation the cap cannot
cover is RESOURCE_EXHAUSTED with RetryInfo.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
from grpc import aio

from tracepass.collector.config import ReceiverConfig
from tracepass.collector.receiver.binding import BindError, ensure_bindable
from tracepass.collector.receiver.core import ReceiverCore, Refusal
from tracepass.collector.receiver.decode import InvalidPayload, decode_message
from tracepass.collector.receiver.fd_budget import DEFAULT_MAX_CONNECTIONS
from tracepass.collector.receiver.signals import SIGNALS, Signal
from tracepass.collector.receiver.status import GRPC_CODES, grpc_trailers

__all__ = ["METHOD", "GrpcReceiver"]

METHOD = "Export"

_Handler = Callable[[AsyncIterator[bytes], aio.ServicerContext[Any, Any]], Awaitable[bytes]]


class GrpcReceiver:
    def __init__(
        self,
        core: ReceiverCore,
        config: ReceiverConfig,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
    ) -> None:
        self._core = core
        self._config = config
        self._server: aio.Server | None = None
        self.port: int | None = None
        self.max_connections = max_connections
        self.receiving = 0  # calls whose message has not arrived yet

    async def start(self) -> int:
        cap = self._config.max_request_bytes
        config = self._config
        server = aio.server(
            options=[
                ("grpc.max_receive_message_length", cap),
                ("grpc.max_send_message_length", 4 * 1024 * 1024),
                ("grpc.so_reuseport", 0),
                ("grpc.max_allowed_incoming_connections", self.max_connections),
                ("grpc.max_concurrent_streams", config.grpc_max_concurrent_streams),
                ("grpc.max_connection_idle_ms", int(config.grpc_idle_timeout_s * 1000)),
                ("grpc.server_handshake_timeout_ms", int(config.header_timeout_s * 1000)),
            ],
        )
        server.add_generic_rpc_handlers(
            tuple(
                grpc.method_handlers_generic_handler(
                    signal.grpc_service,
                    {
                        METHOD: grpc.stream_unary_rpc_method_handler(
                            self._handler(signal),
                            request_deserializer=None,
                            response_serializer=None,
                        )
                    },
                )
                for signal in SIGNALS
            )
        )
        ensure_bindable("receiver.grpc_port", self._config.host, self._config.grpc_port)
        address = f"{_host(self._config.host)}:{self._config.grpc_port}"
        tls = self._config.tls
        if tls is not None:
            creds = grpc.ssl_server_credentials(
                [(_read(tls.key_file), _read(tls.cert_file))], require_client_auth=False
            )
            port: int = server.add_secure_port(address, creds)
        else:
            port = server.add_insecure_port(address)
        if port == 0:
            raise BindError(
                "receiver.grpc_port", self._config.host, self._config.grpc_port, "cannot bind"
            )
        await server.start()
        self._server = server
        self.port = port
        return port

    async def stop(self, grace_s: float) -> None:
        if self._server is not None:
            await self._server.stop(grace_s)
            self._server = None

    def _handler(self, signal: Signal[Any]) -> _Handler:
        async def export(
            messages: AsyncIterator[bytes], context: aio.ServicerContext[Any, Any]
        ) -> bytes:
            return await self._export(signal, messages, context)

        return export

    async def _export(
        self,
        signal: Signal[Any],
        messages: AsyncIterator[bytes],
        context: aio.ServicerContext[Any, Any],
    ) -> bytes:
        core = self._core
        try:
            core.check_auth(_metadata(context, "authorization"))
            core.check_open()
            # The largest message this call may bring is reserved before grpc reads it.
            with core.reserve(self._config.max_request_bytes) as reservation:
                body = await self._receive(messages)
                reservation.shrink_to(len(body))
                with core.admit():
                    try:
                        request = decode_message(body, signal.request_type)
                    except InvalidPayload as exc:
                        raise Refusal("invalid", str(exc)) from None
                    result = await core.ingest(signal, "grpc", request)
        except Exception as exc:
            refusal = exc if isinstance(exc, Refusal) else core.unexpected(signal.name, "grpc", exc)
            core.refused(signal.name, "grpc", refusal)
            # For a message grpc refused, grpc has already sent its own RESOURCE_EXHAUSTED
            # status and this abort only ends the handler. Memory refusals are
            # RESOURCE_EXHAUSTED too (retryable with the RetryInfo sent).
            code = GRPC_CODES[refusal.kind]
            if refusal.memory:
                code = grpc.StatusCode.RESOURCE_EXHAUSTED
            await context.abort(code, refusal.message, trailing_metadata=grpc_trailers(refusal))
            raise AssertionError("unreachable") from None
        return signal.response(result).SerializeToString()

    async def _receive(self, messages: AsyncIterator[bytes]) -> bytes:
        """The call's one message, received before a slot is taken (a slow sender holds
        none), under the same deadline as an HTTP body, by at most `max_connections`
        calls at a time."""
        if self.receiving >= self.max_connections:
            raise Refusal(
                "overloaded",
                f"too many gRPC calls waiting for their message (limit {self.max_connections})",
                retry_after_s=self._config.retry_after_s,
            )
        timeout_s = self._config.body_timeout_s
        self.receiving += 1
        try:
            async with asyncio.timeout(timeout_s):
                return await self._one_message(messages)
        except TimeoutError:
            raise Refusal(
                "timeout", f"request message not received within {timeout_s:g} s"
            ) from None
        finally:
            self.receiving -= 1

    async def _one_message(self, messages: AsyncIterator[bytes]) -> bytes:
        body: bytes | None = None
        async for message in messages:
            if body is not None:
                raise Refusal(
                    "invalid", "Export is a unary call: more than one request message was sent"
                )
            body = message
        if body is None:
            # A unary client always sends exactly one message; none arriving means grpc
            # refused it for exceeding max_receive_message_length (set to our cap).
            raise Refusal(
                "too_large",
                "request message refused: over the limit of "
                f"{self._config.max_request_bytes} bytes after decompression "
                "(or the client sent no message)",
            )
        return body


def _metadata(context: aio.ServicerContext[Any, Any], key: str) -> str | None:
    for k, v in context.invocation_metadata() or ():
        if k == key:
            return v if isinstance(v, str) else v.decode("latin-1")
    return None


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def _read(path: Path) -> bytes:
    return Path(path).read_bytes()
