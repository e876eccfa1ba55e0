"""Late spans after `kill -9`: an evaluated conversation's records are kept on disk only
(`batch` durability: the span buffer, read back when a late span arrives). The real
`tracepass serve` is killed after the evaluation and restarted on the same state file;
a late span then revises the conversation with everything the first evaluation saw."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from _serve import Serve, write_config
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

TRACE = bytes.fromhex("5e" * 16)
ROOT = bytes.fromhex("0a" * 8)


def _request(tools: list[tuple[int, str]], *, root: bool) -> bytes:
    """One turn of conversation `late-1` in GenAI semconv: the `invoke_agent` root (with
    `root`) and an `execute_tool` child per (span number, tool name)."""
    req = ExportTraceServiceRequest()
    spans = req.resource_spans.add().scope_spans.add().spans
    t0 = time.time_ns()

    def span(span_id: bytes, parent: bytes | None, name: str, attrs: dict[str, str]) -> None:
        s = spans.add()
        s.trace_id, s.span_id, s.name = TRACE, span_id, name
        if parent is not None:
            s.parent_span_id = parent
        s.start_time_unix_nano, s.end_time_unix_nano = t0, t0 + 1_000_000
        for k, v in {"gen_ai.conversation.id": "late-1", **attrs}.items():
            s.attributes.add(key=k).value.string_value = v

    if root:
        span(
            ROOT,
            None,
            "invoke_agent bot",
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.input.messages": '[{"role":"user","content":"question 0"}]',
                "gen_ai.output.messages": '[{"role":"assistant","content":"answer 0"}]',
            },
        )
    for n, name in tools:
        span(
            n.to_bytes(8, "big"),
            ROOT,
            f"execute_tool {name}",
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": name,
                "gen_ai.tool.call.arguments": '{"x": 1}',
            },
        )
    return req.SerializeToString()


def _view(serve: Serve) -> dict[str, Any] | None:
    status, body = serve.request("GET", "/api/v1/conversations/late-1")
    return json.loads(body) if status == 200 else None


def _wait_revision(serve: Serve, revision: int) -> dict[str, Any]:
    deadline = time.monotonic() + 120
    while True:
        view = _view(serve)
        if (
            view is not None
            and view.get("revision") == revision
            and view.get("status") != "open"
            and view.get("evaluation")
        ):
            return view
        assert time.monotonic() < deadline, f"revision {revision} never shown: {view}"
        time.sleep(0.2)


def _gauge(serve: Serve, name: str, value: float) -> bool:
    """Whether the gauge `name` shows `value` within a generous deadline."""
    deadline = time.monotonic() + 60
    while sum(v for (n, _), v in serve.samples().items() if n == name) != value:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def _tools(view: dict[str, Any]) -> list[str]:
    return [c["name"] for turn in view["turns"] for c in turn["tool_calls"]]


def test_a_late_span_after_kill_9_revises_from_the_span_buffer(tmp_path: Path) -> None:
    state = tmp_path / "state.sqlite"
    config = write_config(tmp_path, state)
    serve = Serve(config)
    try:
        assert serve.request("POST", "/v1/traces", _request([(1, "geo")], root=True))[0] == 200
        assert serve.request("POST", "/v1/traces", _request([(2, "weather")], root=False))[0] == 200
        first = _wait_revision(serve, 0)
        assert _tools(first) == ["geo", "weather"]
        assert _gauge(serve, "tracepass_retained_spans", 3)
    finally:
        serve.stop(kill=True)

    serve = Serve(config)
    try:
        # Retained again after the restart, its records on disk only.
        assert _gauge(serve, "tracepass_retained_spans", 3)
        assert _gauge(serve, "tracepass_buffered_spans", 0)
        late = _request([(2, "weather"), (3, "late")], root=False)  # a retry + a late span
        assert serve.request("POST", "/v1/traces", late)[0] == 200
        revised = _wait_revision(serve, 1)
        assert _tools(revised) == ["geo", "weather", "late"]
    finally:
        serve.stop(kill=True)
