"""Helpers for the live end-to-end tests: real `tracepass` subprocesses on ephemeral
ports, the example agent exporting over real OTLP, `/metrics` scraped over HTTP."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml
from prometheus_client.parser import text_string_to_metric_families

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
TRAVEL_AGENT = EXAMPLES / "travel_agent.py"
BIN = Path(sys.executable).parent
TRACEPASS = str(BIN / "tracepass")
# The machine may be loaded (parallel test workers): generous, but bounded.
START_TIMEOUT = 120.0
T = TypeVar("T")


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def wait_until(fn: Callable[[], T | None], timeout: float, what: str, interval: float = 0.2) -> T:
    deadline = time.monotonic() + timeout
    last_exc: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = fn()
        except (OSError, urllib.error.URLError, ValueError) as exc:
            last_exc = exc
            value = None
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last error: {last_exc})")


def http_get(url: str, timeout: float = 30.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


Sample = tuple[str, dict[str, str], float]


def scrape(url: str) -> list[Sample]:
    status, body = http_get(url)
    assert status == 200, body
    out: list[Sample] = []
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            out.append((s.name, dict(s.labels), float(s.value)))
    return out


def select(samples: list[Sample], name: str, **labels: str) -> list[Sample]:
    return [s for s in samples if s[0] == name and all(s[1].get(k) == v for k, v in labels.items())]


def total(samples: list[Sample], name: str, **labels: str) -> float:
    return sum(s[2] for s in select(samples, name, **labels))


def port_free(port: int) -> bool:
    """Nothing listens on `port` and a new server could bind it (SO_REUSEADDR, as
    servers do: connections the test itself closed may linger in TIME_WAIT)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as c:
        c.settimeout(2)
        if c.connect_ex(("127.0.0.1", port)) == 0:
            return False
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def write_config(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


FAST_CONFIG: dict[str, Any] = {
    "assembly": {"idle_timeout_s": 3, "tick_interval_s": 0.2, "trace_grace_s": 1},
    "metrics": {
        "windows": [{"name": "5m", "seconds": 300}],
        "decay_half_life_s": 60,
        "ks": [1, 3],
        "min_conversations": 5,
        "export_interval_s": 1,
    },
}


@dataclass
class Serve:
    proc: subprocess.Popen[bytes]
    ports: dict[str, Any]
    stderr_path: Path

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.ports['http_port']}"

    @property
    def grpc(self) -> str:
        return f"http://127.0.0.1:{self.ports['grpc_port']}"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['metrics_port']}/metrics"

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def terminate(self, timeout: float = 60.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=120)
            raise AssertionError(
                f"tracepass serve did not stop on SIGTERM:\n{self.stderr()}"
            ) from None


@contextlib.contextmanager
def serve(
    tmp_path: Path,
    *args: str,
    config: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
) -> Iterator[Serve]:
    ports_file = tmp_path / "ports.json"
    ports_file.unlink(missing_ok=True)
    cmd = [
        TRACEPASS, "serve",
        "--grpc-port", "0", "--http-port", "0", "--metrics-port", "0",
        "--host", "127.0.0.1",
        "--state", str(tmp_path / "state.sqlite"),
        "--ports-file", str(ports_file),
        *args,
    ]  # fmt: skip
    if config is not None:
        cmd += ["--config", str(write_config(tmp_path / "config.yaml", config))]
    err = tmp_path / "serve.stderr"
    with err.open("wb") as err_f:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=err_f, env=clean_env(**(env or {}))
        )
    s = Serve(proc, {}, err)
    try:

        def ready() -> dict[str, Any] | None:
            if proc.poll() is not None:
                raise AssertionError(f"serve exited {proc.returncode}:\n{s.stderr()}")
            return json.loads(ports_file.read_text()) if ports_file.exists() else None

        s.ports = wait_until(ready, START_TIMEOUT, "tracepass serve to listen")
        yield s
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=120)
        if proc.stdout is not None:
            proc.stdout.close()


def run_agent(
    endpoint: str,
    *args: str,
    protocol: str = "http/protobuf",
    timeout: float = 120.0,
) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, str(TRAVEL_AGENT), "--endpoint", endpoint, "--protocol", protocol, *args]
    done = subprocess.run(cmd, capture_output=True, text=True, env=clean_env(), timeout=timeout)
    assert done.returncode == 0, done.stderr
    return done
