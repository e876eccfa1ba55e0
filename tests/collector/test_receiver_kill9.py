"""Durability through the whole product: `tracepass serve` (batch durability) is sent
OTLP/HTTP requests, killed with SIGKILL mid-stream, and every span of every request it
answered 200 must be in its state file; restarted on that file, a conversation left
open before the kill resumes and completes when its second turn arrives."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from _receiver_support import make_spans, span_ids
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracepass.collector.normalize import normalize_request
from tracepass.collector.state import StateStore

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

TRACEPASS = Path(sys.executable).parent / "tracepass"
REFERENCES = """\
name: kill9
version: "1"
references:
  - id: two-questions
    turns:
      - query: question 0
        expected_answer: answer 0
        expected_tools: [get_weather]
      - query: question 1
        expected_answer: answer 1
        expected_tools: [get_weather]
"""


class Serve:
    def __init__(self, tmp_path: Path, state: Path) -> None:
        refs = tmp_path / "refs.yaml"
        refs.write_text(REFERENCES, encoding="utf-8")
        self.proc = subprocess.Popen(
            [
                str(TRACEPASS),
                "serve",
                "--references",
                str(refs),
                "--host",
                "127.0.0.1",
                "--grpc-port",
                "0",
                "--http-port",
                "0",
                "--metrics-port",
                "0",
                "--state",
                str(state),
                "--durability",
                "batch",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, self.proc.stderr.read() if self.proc.stderr else ""
        self.port = int(json.loads(line)["http_port"])
        deadline = time.monotonic() + 30
        while self.request("GET", "/readyz")[0] != 200:
            assert time.monotonic() < deadline, "collector never became ready"
            time.sleep(0.05)

    def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            headers = {"Content-Type": "application/x-protobuf"} if body is not None else {}
            conn.request(method, path, body=body, headers=headers)
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    def export(self, request: ExportTraceServiceRequest) -> int:
        return self.request("POST", "/v1/traces", request.SerializeToString())[0]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)


def _turn_requests(conversation: str) -> list[ExportTraceServiceRequest]:
    """A two-turn conversation as one request per turn (each turn is its own trace)."""
    spans = make_spans(2, conversation)
    first_start: dict[int, int] = {}
    for s in spans:
        t = s.context.trace_id
        first_start[t] = min(first_start.get(t, s.start_time or 0), s.start_time or 0)
    order = sorted(first_start, key=first_start.__getitem__)
    return [encode_spans([s for s in spans if s.context.trace_id == t]) for t in order]


def _stored(state: Path) -> set[tuple[str, str]]:
    store = StateStore(state)
    store.open()
    try:
        loaded = store.load(normalize_request)
        return store.span_ids() | {(r.trace_id, r.span_id) for c in loaded for r in c.records}
    finally:
        store.close()


def test_acknowledged_spans_survive_kill_9_and_open_conversations_resume(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state" / "state.sqlite"
    turn1, turn2 = _turn_requests("resume-me")
    serve = Serve(tmp_path, state)
    acked: set[tuple[str, str]] = set()
    try:
        assert serve.export(turn1) == 200
        acked |= {(t.hex(), s.hex()) for t, s in span_ids(turn1)}
        killer: threading.Timer | None = None
        i = 0
        while True:
            i += 1
            req = encode_spans(make_spans(1, f"bulk-{i}"))
            try:
                status = serve.export(req)
            except OSError:
                break  # the kill landed during this request: not acknowledged
            if status != 200:
                break
            acked |= {(t.hex(), s.hex()) for t, s in span_ids(req)}
            if i == 30:
                # SIGKILL from another thread, so it lands while requests are in flight.
                killer = threading.Timer(0.05, os.kill, (serve.proc.pid, signal.SIGKILL))
                killer.start()
            assert i < 10_000, "the collector was never killed"
        if killer is not None:
            killer.join()
        assert serve.proc.wait(timeout=10) == -signal.SIGKILL
    finally:
        serve.stop()
    assert len(acked) >= 30 * 3
    missing = acked - _stored(state)
    assert not missing, f"{len(missing)} of {len(acked)} acknowledged spans lost"

    serve = Serve(tmp_path, state)
    try:
        status, body = serve.request("GET", "/api/v1/conversations/resume-me")
        assert status == 200
        view: dict[str, Any] = json.loads(body)
        assert (view["status"], len(view["turns"])) == ("open", 1)  # resumed, still open
        assert serve.export(turn2) == 200
        deadline = time.monotonic() + 30
        while view["status"] != "evaluated":
            assert time.monotonic() < deadline, view
            time.sleep(0.05)
            view = json.loads(serve.request("GET", "/api/v1/conversations/resume-me")[1])
        assert [t["query"] for t in view["turns"]] == ["question 0", "question 1"]
        assert view["evaluation"]["reference_id"] == "two-questions"
        assert view["complete"] is True
    finally:
        serve.stop()
