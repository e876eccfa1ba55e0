"""The Prometheus `/metrics` endpoint, optionally behind a bearer token.

prometheus_client's `start_http_server` has no authentication, and tracepass's metrics
name agents, reference sets and failure rates: on a shared network they are worth
protecting like the conversation API. This serves the same WSGI app on its own daemon
thread (off the event loop, as before) and answers 401 with `WWW-Authenticate` unless
the request carries `Authorization: Bearer <token>` (compared in constant time).
"""

from __future__ import annotations

import hmac
import socket
import threading
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

__all__ = ["serve_metrics"]

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes every 15 s are not news; errors still reach the server's stderr."""


def _with_bearer_token(app: WsgiApp, token: str) -> WsgiApp:
    expected = f"Bearer {token}".encode()

    def guarded(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        given = environ.get("HTTP_AUTHORIZATION", "").strip().encode("latin-1", "replace")
        if not hmac.compare_digest(given, expected):
            start_response(
                "401 Unauthorized",
                [
                    ("Content-Type", "text/plain; charset=utf-8"),
                    ("WWW-Authenticate", 'Bearer realm="tracepass"'),
                ],
            )
            return [b"missing or invalid bearer token\n"]
        return app(environ, start_response)

    return guarded


def serve_metrics(
    registry: CollectorRegistry, host: str, port: int, bearer_token: str | None
) -> tuple[WSGIServer, threading.Thread]:
    """Bind `host:port` (port 0: any free) and serve `registry` on a daemon thread."""
    family, _, _, _, sockaddr = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]

    class Server(ThreadingWSGIServer):
        address_family = family

    app: WsgiApp = make_wsgi_app(registry)
    if bearer_token:
        app = _with_bearer_token(app, bearer_token)
    httpd = make_server(str(sockaddr[0]), port, app, Server, handler_class=_QuietHandler)
    thread = threading.Thread(target=httpd.serve_forever, name="tracepass-metrics", daemon=True)
    thread.start()
    return httpd, thread
