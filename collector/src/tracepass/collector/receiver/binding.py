"""Listening sockets that fail with a message naming the port and the setting.

Why a pre-check for gRPC: grpc's C core logs its own multi-line error to stderr when a
port cannot be bound, before Python sees anything; binding a plain socket first (with
the same no-reuse semantics the gRPC server is given) reports the clash cleanly and
leaves the gRPC server never trying a port that is taken.
"""

from __future__ import annotations

import errno
import socket

__all__ = ["BindError", "ensure_bindable"]


class BindError(OSError):
    """A port that cannot be bound. `setting` is the config key that chose it
    (`receiver.grpc_port`, `receiver.http_port`, `metrics.prometheus_port`)."""

    def __init__(self, setting: str, host: str, port: int, reason: str) -> None:
        super().__init__(f"{setting} {port} on {host or '*'}: {reason}")
        self.setting = setting
        self.host = host
        self.port = port
        self.reason = reason


def reason_of(exc: OSError) -> str:
    if exc.errno == errno.EADDRINUSE:
        return "address already in use"
    if exc.errno == errno.EACCES:
        return "permission denied"
    if exc.errno == errno.EADDRNOTAVAIL:
        return "address not available on this machine"
    return exc.strerror or str(exc)


def ensure_bindable(setting: str, host: str, port: int) -> None:
    """Raise `BindError` if `host:port` cannot be bound now (port 0 always can)."""
    if port == 0:
        return
    try:
        infos = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as exc:
        raise BindError(setting, host, port, f"cannot resolve host: {exc.strerror}") from exc
    for family, kind, proto, _, address in infos[:1]:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(address)
            except OSError as exc:
                raise BindError(setting, host, port, reason_of(exc)) from exc
