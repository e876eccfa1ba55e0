"""A real `tracepass serve` replica for the tests that run several on one PostgreSQL
results store (test_replicas_postgres.py, test_replicas_shared_triage.py)."""

from __future__ import annotations

import json
import signal
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from _live_support import TRACEPASS, clean_env, http_get, wait_until, write_config
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult

__all__ = ["Replica", "post", "replica_config"]


class Replica:
    """`tracepass serve` on its own state file; `kill()` is SIGKILL, `start()` again
    resumes from the same file (new ports)."""

    def __init__(self, directory: Path, config: Path, env: dict[str, str] | None = None) -> None:
        self.dir = directory
        self.config = config
        self.env = env or {}
        self.proc: subprocess.Popen[bytes] | None = None
        self.ports: dict[str, Any] = {}

    def start(self) -> None:
        ports_file = self.dir / "ports.json"
        ports_file.unlink(missing_ok=True)
        err = (self.dir / "serve.stderr").open("ab")
        self.proc = subprocess.Popen(
            [TRACEPASS, "serve", "--config", str(self.config), "--ports-file", str(ports_file)],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=clean_env(**self.env),
        )
        err.close()
        proc = self.proc

        def listening() -> dict[str, Any] | None:
            if proc.poll() is not None:
                raise AssertionError(f"serve exited {proc.returncode}:\n{self.stderr()}")
            return json.loads(ports_file.read_text()) if ports_file.exists() else None

        self.ports = wait_until(listening, 120, "tracepass serve to listen")

    def stderr(self) -> str:
        return (self.dir / "serve.stderr").read_text(errors="replace")

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.ports['http_port']}"

    def export(self, spans: list[ReadableSpan]) -> bool:
        exporter = OTLPSpanExporter(endpoint=f"{self.http}/v1/traces", timeout=10)
        try:
            return exporter.export(spans) == SpanExportResult.SUCCESS
        except Exception:
            return False
        finally:
            exporter.shutdown()

    def send(self, spans: list[ReadableSpan]) -> None:
        """Until acknowledged (a refused or lost export is retried, as exporters do)."""
        wait_until(lambda: self.export(spans), 120, "an export to be acknowledged", 0.5)

    def json(self, path: str) -> Any:
        status, body = http_get(self.http + path, timeout=30)
        assert status == 200, (path, status, body[:500])
        return json.loads(body)

    def listed(self) -> set[str] | None:
        """Every conversation the list returns (None: 503, the database is reconnecting)."""
        status, body = http_get(self.http + "/api/v1/conversations?limit=500", timeout=30)
        if status == 503:
            return None
        assert status == 200, (status, body[:500])
        return {c["conversation_id"] for c in json.loads(body)["conversations"]}

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


def replica_config(
    directory: Path, refs: Path, url: str, write_token: str, **sections: Any
) -> Path:
    """A replica's config: loopback ports picked by the OS, fast assembly, its own state
    file, the shared results store `url`, the write token; `sections` add or replace
    top-level sections."""
    return write_config(
        directory / "tracepass.yaml",
        {
            "references": [str(refs)],
            "receiver": {"host": "127.0.0.1", "grpc_port": 0, "http_port": 0},
            "assembly": {"idle_timeout_s": 0.5, "trace_grace_s": 0.2, "tick_interval_s": 0.1},
            "state": {"path": str(directory / "state.sqlite"), "results_url": url},
            "api": {"write_token": write_token},
            "metrics": {"prometheus_port": 0, "windows": [{"name": "1h", "seconds": 3600}]},
            **sections,
        },
    )


def post(replica: Replica, path: str, body: dict[str, Any], token: str) -> tuple[int, Any]:
    """A JSON POST to a write route with the write token: (status, decoded body)."""
    request = urllib.request.Request(
        f"{replica.http}{path}",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            return int(r.status), json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read()[:500]
