"""`shutdown()` with the collector down: bounded (5 s by default, configurable), one
warning line instead of a retry message per batch, for both a port that refuses
connections and one that accepts and never answers, over the real OTLP HTTP and gRPC
exporters in a fresh process; and OTEL_TRACES_EXPORTER=none wins over an explicit
endpoint. Wall-clock assertions are loose (a loaded machine): the budget is what counts."""

from __future__ import annotations

import http.server
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from tracepass.instrumentation._bounded import (
    DEFAULT_SHUTDOWN_TIMEOUT_S,
    SHUTDOWN_TIMEOUT_ENV,
    resolve_shutdown_timeout,
)

pytestmark = pytest.mark.slow  # starts a process or a server

AGENT = textwrap.dedent(
    """
    import sys, time
    from tracepass.instrumentation import agent, configure, conversation, shutdown

    configure(service_name="bounded", endpoint=sys.argv[1], protocol=sys.argv[2])

    @agent(name="bounded-agent", version="1")
    def answer(query: str) -> str:
        return "ok"

    for i in range(300):  # several batches (512 spans each) queued at shutdown
        with conversation():
            answer("q")
    started = time.monotonic()
    shutdown()
    print(f"shutdown took {time.monotonic() - started:.2f} s", flush=True)
    """
)


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TRACEPASS_"))}
    return {**env, **extra}


def _run(tmp_path: Path, endpoint: str, protocol: str, **env: str) -> tuple[float, str, str]:
    script = tmp_path / "agent.py"
    script.write_text(AGENT, encoding="utf-8")
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, str(script), endpoint, protocol],
        capture_output=True, text=True, timeout=120, env=_env(**env), check=False,
    )  # fmt: skip
    wall = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    return wall, done.stdout, done.stderr


@pytest.fixture
def refusing_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again: connections are refused


@pytest.fixture
def silent_port() -> Iterator[int]:
    """Accepts connections (the kernel's backlog) and never reads or answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(64)
        yield int(s.getsockname()[1])


def _shutdown_seconds(stdout: str) -> float:
    line = next(line for line in stdout.splitlines() if line.startswith("shutdown took"))
    return float(line.split()[2])


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
@pytest.mark.parametrize("collector", ["refusing", "silent"])
def test_shutdown_is_bounded_with_the_collector_down(
    tmp_path: Path, protocol: str, collector: str, request: pytest.FixtureRequest
) -> None:
    port = request.getfixturevalue(f"{collector}_port")
    wall, stdout, stderr = _run(tmp_path, f"http://127.0.0.1:{port}", protocol)
    took = _shutdown_seconds(stdout)
    print(f"{protocol} {collector}: shutdown {took:.2f} s, process {wall:.2f} s")
    assert took < 15, stdout  # the default budget is 5 s; loose for a loaded machine
    assert wall < 60, stdout
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr  # one warning, not a retry message per batch
    assert lines[0].startswith("tracepass: "), stderr
    assert f"127.0.0.1:{port}" in lines[0]
    assert "Transient error" not in stderr


def test_shutdown_budget_is_configurable(tmp_path: Path, silent_port: int) -> None:
    _, stdout, stderr = _run(
        tmp_path, f"http://127.0.0.1:{silent_port}", "grpc", **{SHUTDOWN_TIMEOUT_ENV: "1"}
    )
    assert _shutdown_seconds(stdout) < 10, stdout
    assert len([line for line in stderr.splitlines() if line.strip()]) == 1, stderr


def test_resolve_shutdown_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SHUTDOWN_TIMEOUT_ENV, raising=False)
    assert resolve_shutdown_timeout(None) == DEFAULT_SHUTDOWN_TIMEOUT_S == 5.0
    assert resolve_shutdown_timeout(2.5) == 2.5
    monkeypatch.setenv(SHUTDOWN_TIMEOUT_ENV, "0.5")
    assert resolve_shutdown_timeout(None) == 0.5
    assert resolve_shutdown_timeout(3) == 3  # the argument wins
    monkeypatch.setenv(SHUTDOWN_TIMEOUT_ENV, "soon")
    with pytest.raises(ValueError, match="TRACEPASS_SHUTDOWN_TIMEOUT_S='soon': expected seconds"):
        resolve_shutdown_timeout(None)
    with pytest.raises(ValueError, match="positive"):
        resolve_shutdown_timeout(0)


class _Counting(http.server.BaseHTTPRequestHandler):
    posts: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        type(self).posts.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.mark.parametrize("disabled", [False, True])
def test_otel_traces_exporter_none_beats_an_explicit_endpoint(
    tmp_path: Path, disabled: bool
) -> None:
    _Counting.posts = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Counting)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        env = {"OTEL_TRACES_EXPORTER": "none"} if disabled else {}
        endpoint = f"http://127.0.0.1:{server.server_address[1]}"
        _, _, stderr = _run(tmp_path, endpoint, "http/protobuf", **env)
    finally:
        server.shutdown()
        server.server_close()
    assert stderr.strip() == ""
    if disabled:
        assert _Counting.posts == []
    else:
        assert _Counting.posts
        assert set(_Counting.posts) == {"/v1/traces"}
