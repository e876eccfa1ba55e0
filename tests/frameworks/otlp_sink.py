"""A loopback OTLP/HTTP trace receiver for Python stacks that export with their own
exporter (LiteLLM's OTel callback, MLflow's OTLP export) rather than onto the harness's
in-memory providers: what they send over the wire is what the corpus keeps.

Standard library only at module level (it runs in each framework's environment);
`requests` decodes the protobuf bodies with `opentelemetry-proto`, which every OTLP
exporter installs.
"""

from __future__ import annotations

import gzip
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

import harness

TRACES_PATH = "/v1/traces"


class _Server(ThreadingHTTPServer):
    bodies: list[bytes]
    problems: list[str]


class _Handler(BaseHTTPRequestHandler):
    """Accepts OTLP/HTTP protobuf trace exports; anything else is recorded as a problem."""

    server: _Server

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path != TRACES_PATH:
            self.server.problems.append(f"POST {self.path}: not {TRACES_PATH}")
            self.send_response(404)
        elif "protobuf" not in (self.headers.get("Content-Type") or ""):
            self.server.problems.append(f"content type {self.headers.get('Content-Type')}")
            self.send_response(415)
        else:
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            self.server.bodies.append(body)
            self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


class OtlpSink:
    """`with OtlpSink() as sink:` serves on a free loopback port until the block ends;
    `sink.endpoint` is the traces URL, `sink.requests(scenario)` what arrived."""

    def __init__(self) -> None:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.bodies = []
        self._server.problems = []
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}{TRACES_PATH}"

    def __enter__(self) -> OtlpSink:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()

    def requests(self, scenario: str) -> list[dict[str, Any]]:
        """The export requests as OTLP/JSON (ids in hex), in arrival order."""
        from google.protobuf.json_format import MessageToDict
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        if self._server.problems:
            raise SystemExit(f"{scenario}: unexpected OTLP requests: {self._server.problems}")
        out = []
        for body in self._server.bodies:
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            out.append(harness._hex_ids(MessageToDict(request)))
        if not out:
            raise SystemExit(f"{scenario}: the instrumentation produced no spans")
        return out


def write_corpus(scenario: str, requests: list[dict[str, Any]], meta: harness.Meta) -> str:
    """`<scenario>.otlp.jsonl` (one export request per line) and its truth."""
    import json

    directory = harness.corpus_dir()
    directory.mkdir(parents=True, exist_ok=True)
    otlp = directory / f"{scenario}.otlp.jsonl"
    otlp.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in requests))
    expected = directory / f"{scenario}.expected.json"
    expected.write_text(json.dumps(harness.expected_document(meta), indent=2) + "\n")
    return str(otlp)
