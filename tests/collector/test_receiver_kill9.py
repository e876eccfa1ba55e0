"""Durability through the whole product: `tracepass serve` (batch durability) is sent
OTLP/HTTP requests, killed with SIGKILL mid-stream, and every span of every request it
answered 200 must be in its state file; restarted on that file, a conversation left
open before the kill resumes and completes when its second turn arrives. The same for
logs requests (GenAI events as log records): every acknowledged event is in the state
file, and after the restart the events join the spans that arrive then."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _logs_support import genai_run
from _receiver_support import make_spans, span_ids, to_otlp_json
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracepass.collector.normalize import normalize_logs_request, normalize_request
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


LOG_REFERENCES = """\
name: kill9-logs
version: "1"
references:
  - id: events-only
    turns:
      - query: weather in city 0?
        expected_answer: it is sunny in city 0
        expected_tools: [get_weather]
      - query: weather in city 1?
        expected_answer: it is sunny in city 1
        expected_tools: [get_weather]
"""


class Serve:
    def __init__(self, tmp_path: Path, state: Path, references: str = REFERENCES) -> None:
        refs = tmp_path / "refs.yaml"
        refs.write_text(references, encoding="utf-8")
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
        deadline = time.monotonic() + 120
        while self.request("GET", "/readyz")[0] != 200:
            assert time.monotonic() < deadline, "collector never became ready"
            time.sleep(0.05)

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        content_type: str = "application/x-protobuf",
    ) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            headers = {"Content-Type": content_type} if body is not None else {}
            conn.request(method, path, body=body, headers=headers)
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    def export(self, request: ExportTraceServiceRequest) -> int:
        return self.request("POST", "/v1/traces", request.SerializeToString())[0]

    def export_logs(self, request: ExportLogsServiceRequest, as_json: bool = False) -> int:
        if as_json:
            body = json.dumps(to_otlp_json(request)).encode()
            return self.request("POST", "/v1/logs", body, "application/json")[0]
        return self.request("POST", "/v1/logs", request.SerializeToString())[0]

    def view(self, conversation: str) -> tuple[int, dict[str, Any]]:
        status, body = self.request("GET", f"/api/v1/conversations/{conversation}")
        return status, json.loads(body) if status == 200 else {}

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=120)


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
        loaded = store.load(normalize_request, normalize_logs_request)
        return store.span_ids() | {(r.trace_id, r.span_id) for c in loaded for r in c.records}
    finally:
        store.close()


def _send_until_killed(
    serve: Serve, send: Callable[[int], tuple[int, set[tuple[str, str]]]]
) -> set[tuple[str, str]]:
    """Send request after request (`send(i)`: the answer's status and the ids the request
    carries) and SIGKILL the collector after the 30th, from another thread so that it
    lands while requests are in flight; the ids of every request answered 200."""
    acked: set[tuple[str, str]] = set()
    killer: threading.Timer | None = None
    i = 0
    while True:
        i += 1
        try:
            status, ids = send(i)
        except OSError:
            break  # the kill landed during this request: not acknowledged
        if status != 200:
            break
        acked |= ids
        if i == 30:
            killer = threading.Timer(0.05, os.kill, (serve.proc.pid, signal.SIGKILL))
            killer.start()
        assert i < 10_000, "the collector was never killed"
    if killer is not None:
        killer.join()
    assert serve.proc.wait(timeout=120) == -signal.SIGKILL
    return acked


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

        def send(i: int) -> tuple[int, set[tuple[str, str]]]:
            req = encode_spans(make_spans(1, f"bulk-{i}"))
            return serve.export(req), {(t.hex(), s.hex()) for t, s in span_ids(req)}

        acked |= _send_until_killed(serve, send)
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
        deadline = time.monotonic() + 120
        while view["status"] != "evaluated":
            assert time.monotonic() < deadline, view
            time.sleep(0.05)
            view = json.loads(serve.request("GET", "/api/v1/conversations/resume-me")[1])
        assert [t["query"] for t in view["turns"]] == ["question 0", "question 1"]
        assert view["evaluation"]["reference_id"] == "two-questions"
        assert view["complete"] is True
    finally:
        serve.stop()


def _event_ids(request: ExportLogsServiceRequest) -> set[tuple[str, str]]:
    return {(r.trace_id, r.span_id) for r in normalize_logs_request(request)[0]}


def test_acknowledged_log_events_survive_kill_9_and_join_their_spans_after_restart(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state" / "state.sqlite"
    run = genai_run("events-resume")
    serve = Serve(tmp_path, state, LOG_REFERENCES)
    acked = set()
    try:
        assert serve.export_logs(run.logs_request()) == 200
        acked |= _event_ids(run.logs_request())

        def send(i: int) -> tuple[int, set[tuple[str, str]]]:
            req = genai_run(f"bulk-{i}", turns=1).logs_request()
            return serve.export_logs(req, as_json=i % 2 == 0), _event_ids(req)

        acked |= _send_until_killed(serve, send)
    finally:
        serve.stop()
    assert len(acked) >= 30 * 5
    missing = acked - _stored(state)
    assert not missing, f"{len(missing)} of {len(acked)} acknowledged log events lost"

    serve = Serve(tmp_path, state, LOG_REFERENCES)
    try:
        # The events wait under their trace id until a span names their conversation.
        assert serve.view("events-resume")[0] == 404
        assert serve.export(run.traces_request()) == 200
        deadline = time.monotonic() + 120
        _, view = serve.view("events-resume")
        while view.get("status") != "evaluated":
            assert time.monotonic() < deadline, view
            time.sleep(0.05)
            _, view = serve.view("events-resume")
        turns = view["turns"]
        assert [(t["query"], t["answer"]) for t in turns] == [
            (truth.query, truth.answer) for truth in run.truth
        ]
        calls = [(c["name"], c["arguments"], c["result"]) for t in turns for c in t["tool_calls"]]
        assert calls == [("get_weather", t.arguments, t.result) for t in run.truth]
        assert view["evaluation"]["reference_id"] == "events-only"
    finally:
        serve.stop()
