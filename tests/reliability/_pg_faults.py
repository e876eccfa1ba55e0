"""Faults of a real PostgreSQL for the reliability tests: a TCP proxy that can stop
forwarding (a network black hole: connections stay open, nothing comes back) or drop
everything (the database gone), and SIGSTOP of a running server (every process of it:
connections are accepted by the kernel, never answered)."""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import psycopg


class FaultProxy:
    """127.0.0.1:`port` → `upstream`; `mode` is "pass", "blackhole" or "down"."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream = ("127.0.0.1", upstream_port)
        self.mode = "pass"
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, database: str) -> str:
        return f"postgresql://tracepass@127.0.0.1:{self.port}/{database}"

    def set_mode(self, mode: str) -> None:
        self.mode = mode
        if mode == "down":
            with self._lock:
                for s in self._sockets:
                    with contextlib.suppress(OSError):
                        s.shutdown(socket.SHUT_RDWR)
                        s.close()
                self._sockets.clear()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self.mode == "down":
                client.close()
                continue
            try:
                server = socket.create_connection(self.upstream, timeout=10)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets += [client, server]
            threading.Thread(target=self._pump, args=(client, server), daemon=True).start()

    def _pump(self, a: socket.socket, b: socket.socket) -> None:
        sel = selectors.DefaultSelector()
        sel.register(a, selectors.EVENT_READ, b)
        sel.register(b, selectors.EVENT_READ, a)
        try:
            while not self._closed:
                for key, _ in sel.select(timeout=0.2):
                    src: socket.socket = key.fileobj  # type: ignore[assignment]
                    data = src.recv(65536)
                    if not data:
                        return
                    if self.mode == "pass":
                        key.data.sendall(data)
                    # blackhole: swallowed, the sockets stay open
        except (OSError, ValueError):
            return
        finally:
            sel.close()
            for s in (a, b):
                with contextlib.suppress(OSError):
                    s.close()

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        self.set_mode("down")


def server_pids(url: str) -> list[int]:
    """The postmaster of the server at `url` and every process it started."""
    with psycopg.connect(url, autocommit=True) as conn:
        backend = conn.execute("SELECT pg_backend_pid()").fetchone()
    assert backend is not None
    postmaster = _ppid(int(backend[0]))
    children = [
        int(p.name)
        for p in Path("/proc").iterdir()
        if p.name.isdigit() and _ppid(int(p.name)) == postmaster
    ]
    return [postmaster, *children]


def _ppid(pid: int) -> int:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return -1
    return int(stat.rsplit(")", 1)[1].split()[1])


@contextlib.contextmanager
def stopped(url: str) -> Iterator[None]:
    """The whole server SIGSTOPped for the block (SIGCONT after, whatever happens)."""
    pids = server_pids(url)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
