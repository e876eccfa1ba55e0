"""`tracepass serve` as a child process for the reliability tests: started from a config
file on loopback ports, its ports read from the `listening` line, `/metrics` parsed."""

from __future__ import annotations

import http.client
import json
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

TRACEPASS = Path(sys.executable).parent / "tracepass"

REFERENCES = """\
name: reliability
version: "1"
references:
  - id: two-questions
    turns:
      - query: question 0
        expected_answer: answer 0
      - query: question 1
        expected_answer: answer 1
"""

_SAMPLE = re.compile(r"^(\w+)\{(.*)\} (\S+)$")


def write_config(tmp_path: Path, state: Path, **sections: dict[str, Any]) -> Path:
    """A config with fast completion (idle 0.5 s), one 1 h window and no minimum n."""
    refs = tmp_path / "refs.yaml"
    refs.write_text(REFERENCES, encoding="utf-8")
    config: dict[str, Any] = {
        "references": [str(refs)],
        "receiver": {"host": "127.0.0.1", "grpc_port": 0, "http_port": 0},
        "assembly": {"idle_timeout_s": 0.5, "trace_grace_s": 0.2, "tick_interval_s": 0.1},
        "state": {"path": str(state), "durability": "batch"},
        "metrics": {
            "prometheus_port": 0,
            "windows": [{"name": "1h", "seconds": 3600}],
            "min_conversations": 1,
        },
    }
    for name, values in sections.items():
        config.setdefault(name, {}).update(values)
    path = tmp_path / "tracepass.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


class Serve:
    def __init__(
        self, config: Path, *extra: str, preexec_fn: Callable[[], None] | None = None
    ) -> None:
        self.proc = subprocess.Popen(
            [str(TRACEPASS), "serve", "--config", str(config), "--log-level", "warning", *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=preexec_fn,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(self.proc.stderr.read() if self.proc.stderr else "no output")
        info = json.loads(line)
        self.port = int(info["http_port"])
        self.grpc_port = int(info["grpc_port"])
        self.metrics_url = str(info["metrics_url"])
        deadline = time.monotonic() + 180
        while self.request("GET", "/readyz")[0] != 200:
            assert time.monotonic() < deadline, "collector never became ready"
            time.sleep(0.05)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1/traces"

    def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            headers = {"Content-Type": "application/x-protobuf"} if body is not None else {}
            conn.request(method, path, body=body, headers=headers)
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    def samples(self, prefix: str = "tracepass_") -> dict[tuple[str, str], float]:
        """Every `/metrics` sample whose name starts with `prefix`: (name, labels) → value."""
        with urllib.request.urlopen(self.metrics_url, timeout=30) as resp:
            text = resp.read().decode()
        out: dict[tuple[str, str], float] = {}
        for line in text.splitlines():
            m = _SAMPLE.match(line)
            if m and m.group(1).startswith(prefix):
                out[(m.group(1), m.group(2))] = float(m.group(3))
        return out

    def rss_mb(self) -> float:
        with open(f"/proc/{self.proc.pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return 0.0

    def stop(self, kill: bool = False) -> None:
        if self.proc.poll() is None:
            if kill:
                self.proc.kill()
            else:
                self.proc.terminate()
        self.proc.wait(timeout=120)
