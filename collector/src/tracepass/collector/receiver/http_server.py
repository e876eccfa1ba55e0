"""OTLP/HTTP (`POST /v1/traces`, `POST /v1/logs`: one handler bound to each `Signal`) plus the small HTTP surface of the collector:
`/healthz`, `/readyz`, and the read routes a later stage mounts (`extra_routes`: the
conversation API, `tracepass.collector.api`) behind the same bearer-token check.

The body is streamed through `CappedDecompressor`, so neither a large upload nor a
compression bomb is ever held beyond `max_request_bytes`; `Content-Length` over the cap
is refused before reading anything. Responses use the request's encoding (protobuf or
JSON), as OTLP requires, for successes and failures alike.
"""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from aiohttp import web
from google.protobuf import json_format
from google.protobuf.message import Message

from tracepass.collector.config import ReceiverConfig
from tracepass.collector.receiver.accept_errors import rate_limit_accept_errors
from tracepass.collector.receiver.bad_request_log import install_bad_request_filter
from tracepass.collector.receiver.binding import BindError, reason_of
from tracepass.collector.receiver.connections import ConnectionGuard
from tracepass.collector.receiver.core import ReceiverCore, Refusal
from tracepass.collector.receiver.decode import (
    CappedDecompressor,
    InvalidPayload,
    PayloadTooLarge,
    UnsupportedEncoding,
    decode_message,
)
from tracepass.collector.receiver.fd_budget import DEFAULT_MAX_CONNECTIONS
from tracepass.collector.receiver.memory import Reservation
from tracepass.collector.receiver.otlp_json import OtlpJsonError
from tracepass.collector.receiver.signals import SIGNALS, Signal
from tracepass.collector.receiver.status import HTTP_STATUS, retry_after_header, rpc_status

__all__ = ["GetRoute", "HttpReceiver"]

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
_PROTOBUF_TYPES = frozenset({PROTOBUF, "application/protobuf", "application/vnd.google.protobuf"})
_CHUNK = 64 * 1024

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
GetRoute = tuple[str, Handler]  # (path pattern, handler) of a GET route


class HttpReceiver:
    def __init__(
        self,
        core: ReceiverCore,
        config: ReceiverConfig,
        extra_routes: Sequence[GetRoute] = (),
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
    ) -> None:
        self._core = core
        self._config = config
        self._runner: web.AppRunner | None = None
        self.port: int | None = None
        self.guard = ConnectionGuard(max_connections, config.header_timeout_s)
        # aiohttp would otherwise inflate gzip bodies itself, without any size cap.
        app = web.Application(
            handler_args={"auto_decompress": False}, middlewares=[self._track_requests]
        )
        for signal in SIGNALS:
            app.router.add_post(signal.http_path, self._handler(signal))
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        for path, handler in extra_routes:
            app.router.add_get(path, self._authorized(handler))
        self.app = app

    async def start(self) -> int:
        runner = web.AppRunner(
            self.app, access_log=None, handle_signals=False, shutdown_timeout=1.0
        )
        await runner.setup()
        rate_limit_accept_errors(asyncio.get_running_loop())
        install_bad_request_filter()
        ssl_context: ssl.SSLContext | None = None
        tls = self._config.tls
        if tls is not None:
            ssl_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ssl_context.load_cert_chain(str(tls.cert_file), str(tls.key_file))
        site = _GuardedSite(
            runner,
            self._config.host,
            self._config.http_port,
            ssl_context=ssl_context,
            guard=self.guard,
        )
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            raise BindError(
                "receiver.http_port", self._config.host, self._config.http_port, reason_of(exc)
            ) from exc
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self.port = int(runner.addresses[0][1])
        return self.port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @web.middleware
    async def _track_requests(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Tells the guard a request's headers are complete (its handler runs), so the
        header deadline stops, and re-arms it for the next keep-alive request."""
        transport = request.transport
        self.guard.request_started(transport)
        try:
            return await handler(request)
        finally:
            self.guard.request_finished(transport)

    # --- OTLP --------------------------------------------------------------------------

    def _handler(self, signal: Signal[Any]) -> Handler:
        async def export(request: web.Request) -> web.Response:
            return await self._export(signal, request)

        return export

    async def _export(self, signal: Signal[Any], request: web.Request) -> web.Response:
        core = self._core
        ctype = request.content_type
        as_json = ctype == JSON
        try:
            core.check_auth(request.headers.get("Authorization"))
            if not as_json and ctype not in _PROTOBUF_TYPES:
                raise Refusal(
                    "unsupported",
                    f"unsupported Content-Type {ctype!r} (use {PROTOBUF} or {JSON})",
                )
            # The body is read BEFORE a slot is taken: a client trickling its body in
            # must cost a connection (bounded, with a deadline), never an in-flight slot.
            core.check_open()
            self._check_length(request)
            # The declared size is reserved against the memory cap before reading.
            with core.reserve(request.content_length or 0) as reservation:
                body = await self._read_body(request, reservation)
                with core.admit():
                    try:
                        message = (
                            signal.decode_json(body)
                            if as_json
                            else decode_message(body, signal.request_type)
                        )
                    except OtlpJsonError as exc:
                        raise Refusal(
                            "invalid", f"invalid OTLP/JSON: {exc}", field=exc.path
                        ) from None
                    except InvalidPayload as exc:
                        raise Refusal("invalid", str(exc)) from None
                    result = await core.ingest(signal, "http", message)
        except Refusal as refusal:
            core.refused(signal.name, "http", refusal)
            if refusal.kind == "timeout" or refusal.hang_up:
                return await self._answer_and_hang_up(request, self._error(refusal, as_json))
            return self._error(refusal, as_json)
        except Exception as exc:  # a decoder bug must still be answered and counted
            return self._error(core.unexpected(signal.name, "http", exc), as_json)
        return _message_response(200, signal.response(result), as_json)

    def _check_length(self, request: web.Request) -> None:
        cap = self._config.max_request_bytes
        length = request.content_length
        if length is not None and length > cap:
            raise Refusal("too_large", f"Content-Length {length} exceeds the limit of {cap} bytes")

    async def _read_body(self, request: web.Request, reservation: Reservation) -> bytes:
        cap = self._config.max_request_bytes
        timeout_s = self._config.body_timeout_s
        grow = self._core.grow
        try:
            decoder = CappedDecompressor(request.headers.get("Content-Encoding", ""), cap)
            async with asyncio.timeout(timeout_s):
                async for chunk in request.content.iter_chunked(_CHUNK):
                    decoder.feed(chunk)
                    if decoder.size > reservation.held:  # decompressed, or undeclared
                        try:
                            grow(reservation, decoder.size)
                        except Refusal as refusal:
                            refusal.hang_up = True  # the rest of the body stays unread
                            raise
            return decoder.finish()
        except TimeoutError:
            raise Refusal("timeout", f"request body not received within {timeout_s:g} s") from None
        except UnsupportedEncoding as exc:
            raise Refusal("unsupported", str(exc)) from None
        except PayloadTooLarge as exc:
            raise Refusal("too_large", str(exc)) from None
        except InvalidPayload as exc:
            raise Refusal("invalid", str(exc)) from None

    @staticmethod
    async def _answer_and_hang_up(request: web.Request, response: web.Response) -> web.Response:
        """Send the answer, then close the connection at once: aiohttp would otherwise
        linger up to 10 s reading the rest of a body that is not coming."""
        await response.prepare(request)
        await response.write_eof()
        if request.transport is not None:
            request.transport.close()
        return response

    def _error(self, refusal: Refusal, as_json: bool) -> web.Response:
        response = _message_response(HTTP_STATUS[refusal.kind], rpc_status(refusal), as_json)
        retry_after = retry_after_header(refusal)
        if retry_after is not None:
            response.headers["Retry-After"] = retry_after
        if refusal.kind == "unauthorized":
            response.headers["WWW-Authenticate"] = 'Bearer realm="tracepass"'
        if refusal.kind in ("too_large", "timeout"):
            # The rest of the body may be unread; do not reuse this connection.
            response.force_close()
        return response

    # --- health and queries --------------------------------------------------------------

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def _readyz(self, request: web.Request) -> web.Response:
        if self._core.draining:
            return web.json_response({"status": "shutting down"}, status=503)
        if not self._core.sink.ready():
            # A sink may say why (e.g. the state file was deleted: state/file_identity.py).
            reason = getattr(self._core.sink, "unready_reason", None)
            detail = reason() if callable(reason) else None
            body = {"status": "not ready"} | ({"reason": detail} if detail else {})
            return web.json_response(body, status=503)
        # Degraded but taking spans (e.g. the results database is down and results wait
        # in the local outbox): still ready, so the gateway keeps routing here.
        notes = getattr(self._core.sink, "readiness_notes", None)
        degraded = notes() if callable(notes) else []
        if degraded:
            return web.json_response({"status": "ready", "degraded": degraded})
        return web.json_response({"status": "ready"})

    def _authorized(self, handler: Handler) -> Handler:
        """Mounted routes answer only with the receiver's bearer token, like exports.
        A browser cannot send a bearer header, so HTTP Basic with the token as the
        password (any user name) is accepted too: the 401 challenges for both, and the
        browser asks for it once."""

        async def guarded(request: web.Request) -> web.StreamResponse:
            try:
                self._core.check_auth(_basic_as_bearer(request.headers.get("Authorization")))
            except Refusal as refusal:
                response = web.json_response({"error": refusal.message}, status=401)
                # One challenge per header: browsers act on a Basic challenge only when
                # it is a header of its own (Chromium ignores it after a Bearer one).
                response.headers.add("WWW-Authenticate", 'Basic realm="tracepass", charset="UTF-8"')
                response.headers.add("WWW-Authenticate", 'Bearer realm="tracepass"')
                return response
            return await handler(request)

        return guarded


class _GuardedSite(web.TCPSite):
    """`TCPSite` whose protocol factory is wrapped by the `ConnectionGuard`."""

    def __init__(
        self,
        runner: web.AppRunner,
        host: str,
        port: int,
        *,
        ssl_context: ssl.SSLContext | None,
        guard: ConnectionGuard,
    ) -> None:
        super().__init__(runner, host, port, ssl_context=ssl_context)
        self._guard = guard

    async def start(self) -> None:
        await web.BaseSite.start(self)  # registers the site with the runner
        server = self._runner.server
        assert server is not None
        self._server = await asyncio.get_running_loop().create_server(
            self._guard.factory(server),
            self._host,
            self._port,
            ssl=self._ssl_context,
            backlog=self._backlog,
            reuse_address=self._reuse_address,
            reuse_port=self._reuse_port,
        )


def _basic_as_bearer(header: str | None) -> str | None:
    """`Basic base64(user:token)` → `Bearer token`; anything else unchanged."""
    if header is None or header[:6].lower() != "basic ":
        return header
    try:
        decoded = base64.b64decode(header[6:].strip(), validate=True).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return header
    _, _, password = decoded.partition(":")
    return f"Bearer {password}"


def _message_response(status: int, message: Message, as_json: bool) -> web.Response:
    if as_json:
        body = json.dumps(json_format.MessageToDict(message)).encode()
        return web.Response(status=status, body=body, content_type=JSON)
    return web.Response(status=status, body=message.SerializeToString(), content_type=PROTOBUF)
