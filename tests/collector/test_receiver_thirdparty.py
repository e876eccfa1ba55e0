"""Spans of the REAL openinference-instrumentation-langchain and
opentelemetry-instrumentation-langchain (OpenLLMetry) packages, driving a LangGraph
tool-calling agent (fake chat model only), sent over REAL OTLP into the whole collector:
receiver → pipeline (normalize, SQLite state, assembly) → matching against a reference
file loaded by the real `load_reference_sets` → the real `Evaluator` → the
`GET /api/v1/conversations/{id}` view.

The committed fixtures are POSTed as OTLP/HTTP protobuf (fast); fresh captures run the
scenario in a subprocess whose real `OTLPSpanExporter` (gRPC for one instrumentation,
HTTP for the other) sends small batches, so the conversation arrives split across
requests, with children before their parents.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from _receiver_support import Metrics

from tracepass.collector.api import ConversationViews, conversation_routes
from tracepass.collector.config import AssemblyConfig, MatchingConfig, ReceiverConfig, StateConfig
from tracepass.collector.pipeline import Pipeline
from tracepass.collector.receiver import ReceiverServers
from tracepass.evaluator.scoring.evaluator import Evaluator

pytestmark = pytest.mark.timeout(120)

DATA = Path(__file__).resolve().parents[1] / "data" / "otlp" / "thirdparty"
GENERATE = DATA / "generate.py"
sys.path.insert(0, str(DATA))
import generate as scenario  # noqa: E402

REFERENCES = f"""\
name: langgraph-weather
version: "1"
references:
  - id: weather-and-sum
    turns:
      - query: "{scenario.TURN1_QUERY}"
        expected_answer: sunny
        expected_tools:
          - name: get_weather
            arguments: {{city: Paris, unit: C}}
          - name: add
            arguments: {{a: 2, b: 3}}
      - query: "{scenario.TURN2_QUERY}"
        expected_answer: welcome
        expected_tools: []
"""


@dataclass
class Collector:
    pipeline: Pipeline
    servers: ReceiverServers
    metrics: Metrics
    http: aiohttp.ClientSession

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.servers.http_port}"

    async def view(self, conversation_id: str, timeout_s: float = 120.0) -> dict[str, Any]:
        """The conversation once evaluated (it completes on the reference's turn count)."""
        deadline = time.monotonic() + timeout_s
        while True:
            async with self.http.get(f"{self.base}/api/v1/conversations/{conversation_id}") as r:
                if r.status == 200:
                    body: dict[str, Any] = await r.json()
                    if body["status"] == "evaluated":
                        return body
                else:
                    assert r.status == 404, await r.text()
            assert time.monotonic() < deadline, f"{conversation_id} not evaluated in time"
            await asyncio.sleep(0.05)


@pytest.fixture
async def collector(tmp_path: Path) -> AsyncIterator[Collector]:
    refs = tmp_path / "refs"
    refs.mkdir()
    (refs / "langgraph.yaml").write_text(REFERENCES, encoding="utf-8")
    metrics = Metrics()
    pipeline = Pipeline(
        Evaluator(),
        # Generous idle timeout: completion must come from the reference's turn count.
        assembly=AssemblyConfig(idle_timeout_s=600, tick_interval_s=0.05),
        state=StateConfig(path=tmp_path / "state.sqlite", durability="batch"),
        matching=MatchingConfig(reload_interval_s=0.05),
        references=[refs],
        instruments=metrics.instruments,
        meter=metrics.provider.get_meter("test"),
    )
    await pipeline.start()
    servers = ReceiverServers(
        pipeline,
        metrics.instruments,
        ReceiverConfig(host="127.0.0.1", grpc_port=0, http_port=0),
        extra_routes=conversation_routes(ConversationViews(pipeline)),
    )
    await servers.start()
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http:
            yield Collector(pipeline, servers, metrics, http)
    finally:
        await servers.stop(1.0)
        await pipeline.stop()


def _check(view: dict[str, Any]) -> None:
    # The `tracepass conversations` shape plus the evaluation (docs/collector.md).
    assert list(view) == [
        "conversation_id",
        "agent",
        "trace_ids",
        "usage",
        "duration_s",
        "latency",
        "turns",
        "evaluation",
        "judgements",
        "revision",
        "status",
        "complete",
    ]
    assert view["conversation_id"] == scenario.THREAD_ID
    assert len(view["trace_ids"]) == 2
    assert [(t["query"], t["answer"]) for t in view["turns"]] == [
        (scenario.TURN1_QUERY, scenario.TURN1_ANSWER),
        (scenario.TURN2_QUERY, scenario.TURN2_ANSWER),
    ]
    assert view["turns"][0]["tool_calls"] == [
        {
            "name": "get_weather",
            "arguments": {"city": "Paris", "unit": "C"},
            "result": "Sunny in Paris, 21 C",
            "error": None,
            "call_id": "call_w1",
        },
        {
            "name": "add",
            "arguments": {"a": 2, "b": 3},
            "result": "5",
            "error": None,
            "call_id": "call_a1",
        },
    ]
    assert view["turns"][1]["tool_calls"] == []
    assert view["complete"] is True
    assert view["revision"] == 0
    evaluation = view["evaluation"]
    assert (evaluation["reference_set"], evaluation["reference_id"]) == (
        "langgraph-weather",
        "weather-and-sum",
    )
    first, second = evaluation["turns"]
    assert [t["answer_correct"] for t in (first, second)] == [True, True]
    tools = first["tool_correctness"]
    assert (tools["selection"], tools["parameters"], tools["sequence"]) == (1.0, 1.0, 1.0)
    assert first["trajectory"]["exact"] is True
    # LangChain stringifies tool results: the "5" of the add tool is compared as a number
    # and found in the answer, so the answer is counted as using the tools.
    assert tools["utilization"] == 1.0
    assert tools["correct"] is True


@pytest.mark.parametrize("name", ["openinference", "traceloop"])
async def test_committed_fixture_over_otlp_http(collector: Collector, name: str) -> None:
    data = (DATA / f"langgraph_{name}.binpb").read_bytes()
    async with collector.http.post(
        f"{collector.base}/v1/traces",
        data=data,
        headers={"Content-Type": "application/x-protobuf"},
    ) as r:
        assert r.status == 200, await r.text()
    _check(await collector.view(scenario.THREAD_ID))
    m = collector.metrics
    assert m.value("tracepass_conversations_completed", reason="reference_turns") == 1
    assert m.value("tracepass_conversations_unmatched") == 0
    # A retry of the same request is deduplicated: no second evaluation.
    async with collector.http.post(
        f"{collector.base}/v1/traces",
        data=data,
        headers={"Content-Type": "application/x-protobuf"},
    ) as r:
        assert r.status == 200
    await collector.pipeline.process_due()
    assert (await collector.view(scenario.THREAD_ID))["revision"] == 0


@pytest.mark.slow
@pytest.mark.parametrize(("name", "protocol"), [("openinference", "grpc"), ("traceloop", "http")])
async def test_fresh_capture_sent_by_the_real_exporter(
    collector: Collector, name: str, protocol: str
) -> None:
    if protocol == "grpc":
        args = ["--otlp-grpc", f"127.0.0.1:{collector.servers.grpc_port}"]
    else:
        args = ["--otlp-http", f"{collector.base}/v1/traces"]
    # Async subprocess: the event loop must keep serving the receiver meanwhile.
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(GENERATE),
        name,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        _, stderr = await asyncio.wait_for(proc.communicate(), timeout=300)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, stderr.decode()[-4000:]
    _check(await collector.view(scenario.THREAD_ID))
    m = collector.metrics
    requests = m.value("tracepass_export_requests", protocol=protocol, outcome="ok")
    assert requests > 2  # split across requests (batches of at most 5 spans)
    # At most 5 spans per request; a loaded machine may flush smaller batches on the
    # processor's schedule, so only the bounds hold, not "full but the last".
    spans = m.value("tracepass_spans_received", protocol=protocol)
    assert requests <= spans <= 5 * requests
    assert m.value("tracepass_conversations_completed", reason="reference_turns") == 1
