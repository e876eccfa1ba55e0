"""The pieces of the gateway end-to-end test (test_gateway_e2e.py) and its bench
(bench/bench_gateway.py): the built gateway on the project's static config, `tracepass
serve` replicas on fixed loopback ports, the traffic shapes, and the loadbalancing
exporter's hash ring re-done in Python to predict which replica owns a conversation.

Traffic is made with the real OTel SDK (TracerProvider / LoggerProvider into in-memory
exporters) and sent to the gateway with the real OTLP gRPC exporters, one export per
span (so a trace's spans arrive separately, children first, as SimpleSpanProcessor
sends them), counting what the gateway acknowledged.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk._logs.export import LogRecordExportResult
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
sys.path.insert(0, str(ROOT / "tests" / "collector"))
from _live_support import TRACEPASS, clean_env, http_get, scrape, total, wait_until  # noqa: E402
from _logs_support import genai_run  # noqa: E402

GATEWAY_BIN = ROOT / ".tools" / "bin" / "otelcol-tracepass"
STATIC_CONFIG = ROOT / "deploy" / "otelcol" / "static-two-replicas.yaml"
GROUP_WAIT_S = 1.0  # groupbytrace wait_duration in the test (gateway.yaml: 5 s)
AGENT = "gateway-agent"

REFERENCES = """\
name: gateway
version: "1"
references:
  - id: two-questions
    turns:
      - query: question 0
        expected_answer: answer 0 (result 0)
        graders: [{type: contains, keywords: [answer 0]}]
        expected_tools: [{name: lookup, arguments: {q: 0}}]
      - query: question 1
        expected_answer: answer 1 (result 1)
        graders: [{type: contains, keywords: [answer 1]}]
        expected_tools: [{name: lookup, arguments: {q: 1}}]
  - id: one-question
    turns:
      - query: single question
        expected_answer: single answer (result 9)
        graders: [{type: contains, keywords: [single answer]}]
        expected_tools: [{name: lookup, arguments: {q: 9}}]
  - id: weather-events
    turns:
      - query: weather in city 0?
        expected_answer: it is sunny in city 0
        expected_tools: [{name: get_weather, arguments: {city: city 0}}]
      - query: weather in city 1?
        expected_answer: it is sunny in city 1
        expected_tools: [{name: get_weather, arguments: {city: city 1}}]
"""


def require_gateway() -> Path:
    if not GATEWAY_BIN.exists():
        reason = os.environ.get("TRACEPASS_GATEWAY_SKIP")
        if reason:
            pytest.skip(reason)
        if os.environ.get("TRACEPASS_REQUIRE_SYSTEM_TOOLS") == "1":
            pytest.fail("otelcol-tracepass is required in CI: `make otelcol` builds it")
        pytest.skip("otelcol-tracepass not built (`make otelcol`)")
    return GATEWAY_BIN


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ---------------------------------------------------------------- the hash ring


def _crc(data: bytes) -> int:
    return zlib.crc32(data) & 0xFFFFFFFF


class Ring:
    """The loadbalancing exporter's consistent hash ring (consistent_hashing.go of
    v0.148.0): 100 points per endpoint at crc32(endpoint + uint32le(i)) % 36000, linear
    probing on collisions, endpoints sorted (static resolver); a key goes to the first
    point at or after crc32(key) % 36000."""

    def __init__(self, endpoints: Iterable[str]) -> None:
        used: dict[int, str] = {}
        for endpoint in sorted(endpoints):
            for i in range(100):
                pos = _crc(endpoint.encode() + struct.pack("<I", i)) % 36000
                probes = 0
                while pos in used and probes < 10:
                    pos, probes = (pos + 1) % 36000, probes + 1
                if probes < 10:
                    used[pos] = endpoint
        self.positions = sorted(used)
        self.owners = [used[p] for p in self.positions]

    def owner(self, routing_key: str) -> str:
        pos = _crc(routing_key.encode()) % 36000
        i = bisect.bisect_left(self.positions, pos)
        return self.owners[i % len(self.owners)]


def routing_key(conversation_or_trace: str) -> str:
    """The conversationid processor's routing key (first 16 hex digits of SHA-256)."""
    return hashlib.sha256(conversation_or_trace.encode()).hexdigest()[:16]


# ---------------------------------------------------------------- processes


@dataclass
class Replica:
    """`tracepass serve` on fixed gRPC and metrics ports (the gateway's static list and
    Prometheus name them), its own state file, the shared PostgreSQL results store."""

    directory: Path
    refs: Path
    results_url: str
    grpc_port: int = field(default_factory=free_port)
    metrics_port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    ports: dict[str, Any] = field(default_factory=dict)
    # Above the test's longest gap between a conversation's two traces (the bench
    # lowers it: its traffic has no gaps).
    idle_timeout_s: float = 6.0

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.ports['http_port']}"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    def config(self) -> Path:
        path = self.directory / "tracepass.yaml"
        data = {
            "references": [str(self.refs)],
            "receiver": {"host": "127.0.0.1", "grpc_port": self.grpc_port, "http_port": 0},
            "assembly": {
                "idle_timeout_s": self.idle_timeout_s,
                "trace_grace_s": 0.5,
                "tick_interval_s": 0.2,
            },
            "state": {"path": str(self.directory / "state.sqlite")}
            | ({"results_url": self.results_url} if self.results_url else {}),
            "metrics": {
                "prometheus_port": self.metrics_port,
                "windows": [{"name": "1h", "seconds": 3600}],
                "ks": [1, 3, 5],
                "min_conversations": 1,
                "export_interval_s": 1,
            },
        }
        path.write_text(yaml.safe_dump(data), encoding="utf-8")
        return path

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        ports_file = self.directory / "ports.json"
        ports_file.unlink(missing_ok=True)
        with (self.directory / "serve.stderr").open("ab") as err:
            self.proc = subprocess.Popen(
                [
                    TRACEPASS,
                    "serve",
                    "--config",
                    str(self.config()),
                    "--ports-file",
                    str(ports_file),
                ],
                stdout=subprocess.DEVNULL,
                stderr=err,
                env=clean_env(),
            )
        proc = self.proc

        def listening() -> dict[str, Any] | None:
            if proc.poll() is not None:
                raise AssertionError(f"serve exited {proc.returncode}:\n{self.stderr()}")
            return json.loads(ports_file.read_text()) if ports_file.exists() else None

        self.ports = wait_until(listening, 120, "tracepass serve to listen")

    def stderr(self) -> str:
        path = self.directory / "serve.stderr"
        return path.read_text(errors="replace") if path.exists() else ""

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

    def json(self, path: str) -> Any:
        status, body = http_get(self.http + path, timeout=30)
        assert status == 200, (path, status, body[:500])
        return json.loads(body)

    def listed(self) -> set[str]:
        body = self.json("/api/v1/conversations?limit=500")
        return {c["conversation_id"] for c in body["conversations"]}

    def evaluated(self) -> float:
        """Conversations this replica evaluated, revisions netted out."""
        samples = scrape(self.metrics_url)
        return total(samples, "tracepass_conversations_total") - total(
            samples, "tracepass_conversations_superseded_total"
        )

    def cpu_s(self) -> float:
        return proc_cpu_s(self.proc)


def proc_cpu_s(proc: subprocess.Popen[bytes] | None) -> float:
    """User + system CPU seconds of a running child (from /proc)."""
    assert proc is not None
    fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Gateway:
    """The built distribution on the project's static config, ports rewritten to
    loopback, the replica list and the queue directory set."""

    directory: Path
    grpc_port: int = field(default_factory=free_port)
    health_port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def config(self, replicas: Sequence[str]) -> Path:
        data: dict[str, Any] = yaml.safe_load(STATIC_CONFIG.read_text(encoding="utf-8"))
        protocols = data["receivers"]["otlp"]["protocols"]
        protocols["grpc"]["endpoint"] = self.endpoint
        protocols["http"]["endpoint"] = f"127.0.0.1:{free_port()}"
        data["processors"]["groupbytrace"]["wait_duration"] = f"{GROUP_WAIT_S}s"
        data["processors"]["conversationid"]["log_wait_duration"] = f"{GROUP_WAIT_S + 5}s"
        data["exporters"]["loadbalancing"]["resolver"]["static"]["hostnames"] = list(replicas)
        data["extensions"]["health_check"]["endpoint"] = f"127.0.0.1:{self.health_port}"
        data["extensions"]["file_storage/queue"]["directory"] = str(self.directory / "queue")
        # The Collector's own metrics would listen on :8888; not needed here.
        data["service"]["telemetry"] = {"metrics": {"level": "none"}}
        path = self.directory / "gateway.yaml"
        path.write_text(yaml.safe_dump(data), encoding="utf-8")
        return path

    def start(self, replicas: Sequence[str]) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        config = self.config(replicas)
        with (self.directory / "gateway.stderr").open("ab") as err:
            self.proc = subprocess.Popen(
                [str(require_gateway()), f"--config={config}"],
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
        proc = self.proc

        def healthy() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"gateway exited {proc.returncode}:\n{self.stderr()}")
            status, _ = http_get(f"http://127.0.0.1:{self.health_port}/", timeout=5)
            return status == 200

        wait_until(healthy, 60, "the gateway's health check")

    def stderr(self) -> str:
        path = self.directory / "gateway.stderr"
        return path.read_text(errors="replace")[-6000:] if path.exists() else ""

    def stop(self) -> None:
        """SIGTERM: the Collector drains groupbytrace and its queue, then exits."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)

    def cpu_s(self) -> float:
        return proc_cpu_s(self.proc)


# ---------------------------------------------------------------- traffic


def _messages(role: str, text: str) -> str:
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": text}]}])


# Where a trace carries its conversation id (the processor must find it anywhere).
SHAPES = ("every", "root", "child", "openinference", "traceloop")


def _id_attrs(shape: str, conversation: str, root: bool) -> dict[str, str]:
    if shape == "every" or (shape == "root" and root):
        return {"gen_ai.conversation.id": conversation}
    if shape == "child" and not root:
        return {"gen_ai.conversation.id": conversation}
    if shape == "openinference" and root:
        return {"session.id": conversation}
    if shape == "traceloop" and not root:
        return {"traceloop.association.properties.session_id": conversation}
    return {}


@dataclass
class Conversation:
    """One conversation's spans (and GenAI log events), what the gateway must keep
    together, and the conversation id tracepass will list it under."""

    id: str
    shape: str
    spans: list[ReadableSpan]
    logs: list[ReadableLogRecord] = field(default_factory=list)
    late: list[ReadableSpan] = field(default_factory=list)
    passing: bool = True

    @property
    def key(self) -> str:
        return routing_key(self.id)


def make_conversation(
    cid: str, shape: str, *, fail: bool = False, late: bool = False
) -> Conversation:
    """Two turns, one trace each: `invoke_agent` root with a `lookup` tool call; the id
    placed as `shape` says. `fail`: the second answer is wrong. `late`: the second
    turn's tool span is held back (sent after the trace was released)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": AGENT}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("tests.gateway")
    for turn in range(2):
        answer = "no idea" if fail and turn == 1 else f"answer {turn} (result {turn})"
        with (
            tracer.start_as_current_span(
                f"invoke_agent {AGENT}",
                attributes={
                    "gen_ai.operation.name": "invoke_agent",
                    "gen_ai.agent.name": AGENT,
                    "gen_ai.input.messages": _messages("user", f"question {turn}"),
                    "gen_ai.output.messages": _messages("assistant", answer),
                    **_id_attrs(shape, cid, root=True),
                },
            ),
            tracer.start_as_current_span(
                "execute_tool lookup",
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "lookup",
                    "gen_ai.tool.call.id": f"{cid}-{turn}",
                    "gen_ai.tool.call.arguments": json.dumps({"q": turn}),
                    "gen_ai.tool.call.result": f"result {turn}",
                    **_id_attrs(shape, cid, root=False),
                },
            ),
        ):
            pass
    provider.shutdown()
    spans = list(exporter.get_finished_spans())
    second_tool = f"{cid}-1"
    held = [
        s for s in spans if late and (s.attributes or {}).get("gen_ai.tool.call.id") == second_tool
    ]
    rest = [s for s in spans if s not in held]
    return Conversation(cid, shape, rest, late=held, passing=not fail)


def make_traceless(index: int) -> Conversation:
    """A one-turn trace naming no conversation: tracepass lists it under its trace id,
    and the gateway must key it by trace (not pile such traces on one replica)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": AGENT}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("tests.gateway")
    with tracer.start_as_current_span(
        f"invoke_agent {AGENT}",
        attributes={
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": AGENT,
            "gen_ai.input.messages": _messages("user", "single question"),
            "gen_ai.output.messages": _messages("assistant", "single answer (result 9)"),
        },
    ) as root:
        with tracer.start_as_current_span(
            "execute_tool lookup",
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "lookup",
                "gen_ai.tool.call.id": f"t-{index}",
                "gen_ai.tool.call.arguments": json.dumps({"q": 9}),
                "gen_ai.tool.call.result": "result 9",
            },
        ):
            pass
        trace_id = format(root.get_span_context().trace_id, "032x")
    provider.shutdown()
    return Conversation(trace_id, "traceless", list(exporter.get_finished_spans()))


def make_logs_conversation(cid: str) -> Conversation:
    """The content only in GenAI log events (tests/collector/_logs_support.py): the
    conversation id on the turn roots only, the events name none."""
    run = genai_run(cid)
    # The run's agent is "weather"; its events carry the queries and answers.
    return Conversation(cid, "logs", run.spans, logs=list(run.logs))


@dataclass
class Sender:
    """Real OTLP gRPC exporters to the gateway; counts acknowledged spans and records."""

    endpoint: str
    acked_spans: int = 0
    acked_logs: int = 0

    def spans(self, spans: Sequence[ReadableSpan]) -> None:
        exporter = OTLPSpanExporter(endpoint=self.endpoint, insecure=True, timeout=10)
        try:
            for span in spans:  # one request per span, in the order they ended
                deadline = time.monotonic() + 60
                while exporter.export([span]) != SpanExportResult.SUCCESS:
                    assert time.monotonic() < deadline, "the gateway refused spans for 60 s"
                    time.sleep(0.2)
                self.acked_spans += 1
        finally:
            exporter.shutdown()

    def logs(self, records: Sequence[ReadableLogRecord]) -> None:
        if not records:
            return
        exporter = OTLPLogExporter(endpoint=self.endpoint, insecure=True, timeout=10)
        try:
            deadline = time.monotonic() + 60
            while exporter.export(records) != LogRecordExportResult.SUCCESS:
                assert time.monotonic() < deadline, "the gateway refused logs for 60 s"
                time.sleep(0.2)
            self.acked_logs += len(records)
        finally:
            exporter.shutdown()

    def conversation(self, conv: Conversation) -> None:
        self.logs(conv.logs)  # events first: they usually beat their trace's release
        self.spans(conv.spans)


DECORATED_AGENT = """\
import sys
from tracepass.instrumentation import agent, configure, conversation, shutdown, tool

configure(service_name="gateway-agent", endpoint=sys.argv[1], protocol="grpc")


@tool
def lookup(q: int) -> str:
    return f"result {q}"


@agent(name="gateway-agent")
def ask(question: str) -> str:
    turn = int(question.rsplit(" ", 1)[1])
    return f"answer {turn} ({lookup(q=turn)})"


for cid in sys.argv[2:]:
    with conversation(cid):
        ask("question 0")
        ask("question 1")
shutdown()
"""


def run_decorated_agent(directory: Path, endpoint: str, ids: Sequence[str]) -> None:
    """The project's decorators (`@agent`, `@tool`, `conversation`: the id on every
    span, and the end marker) in their own process, exporting to the gateway."""
    script = directory / "decorated_agent.py"
    script.write_text(DECORATED_AGENT, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script), f"http://{endpoint}", *ids],
        capture_output=True,
        text=True,
        timeout=120,
        env=clean_env(),
    )
    assert done.returncode == 0, done.stderr
