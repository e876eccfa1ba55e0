"""Spans from the REAL openinference-instrumentation-langchain and
opentelemetry-instrumentation-langchain (OpenLLMetry) packages, driving a LangGraph
tool-calling agent with a fake chat model, encoded by the real OTLP encoder.

The committed fixtures are checked first (fast, and what other tests reuse); then each
instrumentation is run afresh in its own subprocess (the two patch LangChain globally,
so they never share a process) to catch behaviour changes in newer package versions.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracepass.collector.normalize import RecordKind, SpanRecord, normalize_request

DATA = Path(__file__).resolve().parents[1] / "data" / "otlp" / "thirdparty"
sys.path.insert(0, str(DATA))
import generate as scenario  # noqa: E402

FIXTURES = {
    "openinference": DATA / "langgraph_openinference.binpb",
    "traceloop": DATA / "langgraph_traceloop.binpb",
}


def _turns(records: list[SpanRecord]) -> list[dict[str, Any]]:
    """The assembly rule documented in docs/conventions.md, applied per trace: the
    outermost TURN record is the turn; its query/answer fall back to the nearest nested
    TURN that has them; its tool calls are the TOOL records below it by start time."""
    by_id = {r.span_id: r for r in records}
    children: dict[str, list[SpanRecord]] = {}
    for r in records:
        if r.parent_span_id:
            children.setdefault(r.parent_span_id, []).append(r)

    def ancestors(r: SpanRecord) -> list[SpanRecord]:
        out = []
        while r.parent_span_id and r.parent_span_id in by_id:
            r = by_id[r.parent_span_id]
            out.append(r)
        return out

    def descendants(r: SpanRecord) -> list[SpanRecord]:
        out, stack = [], list(children.get(r.span_id, []))
        while stack:
            c = stack.pop()
            out.append(c)
            stack.extend(children.get(c.span_id, []))
        return sorted(out, key=lambda x: x.start_ns)

    turns = []
    for r in sorted(records, key=lambda x: x.start_ns):
        if r.kind is not RecordKind.TURN or any(a.kind is RecordKind.TURN for a in ancestors(r)):
            continue
        below = descendants(r)
        nested_turns = [r] + [d for d in below if d.kind is RecordKind.TURN]
        query = next((t.input_text for t in nested_turns if t.input_text), None)
        answer = next((t.output_text for t in nested_turns if t.output_text), None)
        tools = [d for d in below if d.kind is RecordKind.TOOL]
        turns.append(
            {
                "query": query,
                "answer": answer,
                "conversation_id": r.conversation_id,
                "tools": [
                    (t.tool_name, t.tool_arguments, t.tool_result, t.tool_call_id, t.error)
                    for t in tools
                ],
                "requested": [
                    (c.name, c.arguments, c.call_id)
                    for d in below
                    if d.kind is RecordKind.MODEL
                    for c in d.requested_tool_calls
                ],
            }
        )
    return turns


def _check(data: bytes) -> list[SpanRecord]:
    request = ExportTraceServiceRequest.FromString(data)
    records, rejections = normalize_request(request)
    assert rejections == []
    turns = _turns(records)
    assert [(t["query"], t["answer"]) for t in turns] == [
        (scenario.TURN1_QUERY, scenario.TURN1_ANSWER),
        (scenario.TURN2_QUERY, scenario.TURN2_ANSWER),
    ]
    assert turns[0]["tools"] == [
        ("get_weather", {"city": "Paris", "unit": "C"}, "Sunny in Paris, 21 C", "call_w1", None),
        ("add", {"a": 2, "b": 3}, "5", "call_a1", None),
    ]
    assert turns[1]["tools"] == []
    # The same calls are visible in the model's messages (for stacks without tool spans).
    assert turns[0]["requested"] == [
        ("get_weather", {"city": "Paris", "unit": "C"}, "call_w1"),
        ("add", {"a": 2, "b": 3}, "call_a1"),
    ]
    # Both turns are separate traces of one LangGraph thread: one conversation.
    assert {r.conversation_id for r in records} == {scenario.THREAD_ID}
    assert len({r.trace_id for r in records}) == 2
    assert {r.service_name for r in records} == {scenario.SERVICE_NAME}
    assert {r.agent_version for r in records} == {"1.4.0"}
    return records


@pytest.mark.parametrize("instrumentation", sorted(FIXTURES))
def test_committed_fixture(instrumentation: str) -> None:
    records = _check(FIXTURES[instrumentation].read_bytes())
    conventions = {r.attributes.get("tracepass.convention") for r in records}
    assert instrumentation in conventions


@pytest.mark.slow
@pytest.mark.parametrize("instrumentation", sorted(FIXTURES))
def test_fresh_capture_in_subprocess(instrumentation: str, tmp_path: Path) -> None:
    out = tmp_path / "spans.binpb"
    proc = subprocess.run(
        [sys.executable, str(DATA / "generate.py"), instrumentation, str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    _check(out.read_bytes())


def test_traceloop_outer_invoke_agent_has_no_content_but_nested_workflow_does() -> None:
    """Documented nesting case: OpenLLMetry wraps the LangGraph run in a content-less
    `invoke_agent` span whose child workflow span carries query and answer."""
    request = ExportTraceServiceRequest.FromString(FIXTURES["traceloop"].read_bytes())
    records, _ = normalize_request(request)
    roots = [r for r in records if r.kind is RecordKind.TURN and r.parent_span_id is None]
    assert len(roots) == 2
    assert all(r.input_text is None and r.agent_name == "LangGraph" for r in roots)
    workflows = [
        r
        for r in records
        if r.attributes.get("tracepass.convention") == "traceloop" and r.kind is RecordKind.TURN
    ]
    assert {r.parent_span_id for r in workflows} == {r.span_id for r in roots}


@pytest.mark.parametrize("instrumentation", sorted(FIXTURES))
def test_fixture_through_assembly(instrumentation: str) -> None:
    """The records are enough for the assembler's own rules (a later stage, used here
    only to prove the contract end to end)."""
    from tracepass.collector.assembly.build import build_conversation

    request = ExportTraceServiceRequest.FromString(FIXTURES[instrumentation].read_bytes())
    records, _ = normalize_request(request)
    conversation = build_conversation(scenario.THREAD_ID, records)
    assert [(t.query, t.answer) for t in conversation.turns] == [
        (scenario.TURN1_QUERY, scenario.TURN1_ANSWER),
        (scenario.TURN2_QUERY, scenario.TURN2_ANSWER),
    ]
    assert [
        (c.name, c.arguments, c.result, c.call_id) for c in conversation.turns[0].tool_calls
    ] == [
        ("get_weather", {"city": "Paris", "unit": "C"}, "Sunny in Paris, 21 C", "call_w1"),
        ("add", {"a": 2, "b": 3}, "5", "call_a1"),
    ]
