"""Shared parts of the end-to-end benchmarks: the workload (whole 3-turn conversations
that match a generated 54-task reference set), the real `tracepass serve` subprocess,
its CPU time and RSS read from /proc, /metrics reads, and an OTLP/HTTP load generator
that runs in its own process.

Why a subprocess and /proc: a benchmark that imports the collector into its own process
measures what that process does (and charges the load generator, the baseline and the
harness to it). Users run `tracepass serve`; its CPU time is utime + stime of that pid,
which on a shared machine is far steadier than wall time.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import multiprocessing as mp
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

SPANS_PER_REQUEST = 512
TURNS = 3
TOOLS_PER_TURN = 4
# 3 turns x (invoke_agent + 4 execute_tool) + the end marker.
SPANS_PER_CONVERSATION = TURNS * (1 + TOOLS_PER_TURN) + 1
CONVERSATIONS_PER_REQUEST = SPANS_PER_REQUEST // SPANS_PER_CONVERSATION  # 32
TASKS = 54
TOOLS = ("lookup_order", "get_eta", "check_stock", "notify_customer")
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


# ---------------------------------------------------------------------------- workload


def query(task: int, turn: int) -> str:
    return f"Task {task} step {turn}: where is order O-{task}-{turn} and when does it arrive?"


# Conversation shapes (`bench_e2e.py --shapes`): 16 = 3 turns x (invoke_agent + 4
# execute_tool) + the end marker; 9 = 3 turns x (invoke_agent + 1-3 execute_tool, 2 on
# average), no end marker: complete when the matched reference's 3 turns have arrived.
SHAPES = (9, 16)


def turn_tools(task: int, turn: int, shape: int = 16) -> tuple[str, ...]:
    """The tools a turn calls: all four in the 16-span shape; 1-3 (by task and turn, 2 on
    average over the 54 tasks) in the 9-span shape."""
    return TOOLS if shape == 16 else TOOLS[: 1 + (task + turn) % 3]


def reference_set_yaml(tasks: int = TASKS, *, shape: int = 16, unmatched: bool = False) -> str:
    """A reference set of `tasks` 3-turn tasks, each turn expecting its tool calls (exact
    arguments; `turn_tools`) and an answer containing 'shipped'. `unmatched`: the same
    set with queries no conversation asks (a server that buffers but never matches)."""
    lines = ["name: bench", 'version: "1"', "references:"]
    for task in range(tasks):
        lines.append(f"  - id: task-{task}")
        lines.append("    turns:")
        for turn in range(TURNS):
            q = f"never asked {task} {turn}" if unmatched else query(task, turn)
            lines.append(f'      - query: "{q}"')
            lines.append("        expected_answer: shipped")
            lines.append("        expected_tools:")
            for tool in turn_tools(task, turn, shape):
                lines.append(f"          - name: {tool}")
                lines.append(f'            arguments: {{order_id: "O-{task}-{turn}"}}')
    return "\n".join(lines) + "\n"


def _id(*parts: object, size: int) -> bytes:
    return hashlib.blake2b(repr(parts).encode(), digest_size=size).digest()


def _text(key: str, value: str, attrs: Any) -> None:
    attrs.add(key=key).value.string_value = value


def _draw(*parts: object) -> float:
    """A deterministic draw in [0, 1) (the same conversation fails the same way in
    every run and every process)."""
    return int.from_bytes(_id(*parts, size=4), "big") / 2**32


def turn_faults(conv: str, turn: int, fail_p: float) -> tuple[bool, bool]:
    """(wrong tool argument, wrong answer) of one turn: each with probability `fail_p`."""
    return _draw(conv, turn, "args") < fail_p, _draw(conv, turn, "answer") < fail_p


def conversation_fails(conv: str, fail_p: float, turns: int = TURNS) -> bool:
    """Whether `add_conversation(..., fail_p=fail_p)` makes `conv` fail (any wrong
    argument or answer in any turn): the benchmark's count of failing conversations."""
    return any(any(turn_faults(conv, t, fail_p)) for t in range(turns))


def add_conversation(
    spans: Any,
    conv: str,
    task: int,
    *,
    agent: str = "bot",
    matching: bool = True,
    end_marker: bool | None = None,
    turns: int = TURNS,
    t0_ns: int = 1_700_000_000_000_000_000,
    shape: int = 16,
    fail_p: float | None = None,
) -> None:
    """Append one conversation's spans (one trace per turn, the end marker in its own
    trace). `shape` 16: 16 spans; 9: 1-3 tools per turn (`turn_tools`) and no end marker
    unless `end_marker=True`.
    Failures: with `fail_p` None every 5th conversation passes a wrong argument (a failing
    outcome), so both outcome labels are exported; with `fail_p` each turn independently
    has a wrong tool argument and a wrong answer with probability `fail_p`
    (`turn_faults`; 0.1 fails ~47 % of conversations). `turns` other than 3 only for
    conversations that never complete (the memory benchmark). `matching=False` changes
    the queries so no reference matches, and `end_marker=False` sends a 5th tool span
    instead of the marker: such a conversation never completes (the ingest-only runs)."""
    legacy_wrong = int(hashlib.blake2b(conv.encode(), digest_size=1).digest()[0]) % 5 == 0
    if end_marker is None:
        end_marker = shape == 16
    for turn in range(turns):
        if fail_p is None:
            wrong_arg, wrong_answer = legacy_wrong and turn == 1, False
        else:
            wrong_arg, wrong_answer = turn_faults(conv, turn, fail_p)
        answer = "Sorry, I could not find it." if wrong_answer else "Your order has shipped."
        trace = _id(conv, turn, size=16)
        root = _id(conv, turn, "root", size=8)
        start = t0_ns + turn * 1_000_000_000
        q = query(task, turn) if matching else f"unmatched {conv} {turn}: where is my order?"
        span = spans.add()
        span.trace_id, span.span_id, span.name = trace, root, f"invoke_agent {agent}"
        span.start_time_unix_nano, span.end_time_unix_nano = start, start + 900_000_000
        a = span.attributes
        _text("gen_ai.conversation.id", conv, a)
        _text("gen_ai.operation.name", "invoke_agent", a)
        _text("gen_ai.agent.name", agent, a)
        _text("gen_ai.agent.version", "1.0.0", a)
        _text(
            "gen_ai.input.messages",
            json.dumps([{"role": "user", "parts": [{"type": "text", "content": q}]}]),
            a,
        )
        _text(
            "gen_ai.output.messages",
            json.dumps(
                [
                    {
                        "role": "assistant",
                        "parts": [{"type": "text", "content": answer}],
                        "finish_reason": "stop",
                    }
                ]
            ),
            a,
        )
        extra = shape == 16 and not end_marker and turn == TURNS - 1
        tools = turn_tools(task, turn, shape) + (("audit",) if extra else ())
        for i, tool in enumerate(tools):
            child = spans.add()
            child.trace_id, child.span_id = trace, _id(conv, turn, i, size=8)
            child.parent_span_id, child.name = root, f"execute_tool {tool}"
            child.start_time_unix_nano = start + (i + 1) * 100_000_000
            child.end_time_unix_nano = child.start_time_unix_nano + 50_000_000
            order = "O-0-0" if wrong_arg and i == 0 else f"O-{task}-{turn}"
            b = child.attributes
            _text("gen_ai.conversation.id", conv, b)
            _text("gen_ai.operation.name", "execute_tool", b)
            _text("gen_ai.tool.name", tool, b)
            _text("gen_ai.tool.call.id", f"call-{conv}-{turn}-{i}", b)
            _text("gen_ai.tool.call.arguments", json.dumps({"order_id": order}), b)
            _text("gen_ai.tool.call.result", '{"status":"shipped","eta":"Tuesday"}', b)
    if end_marker:
        end = spans.add()
        end.trace_id, end.span_id = _id(conv, "end", size=16), _id(conv, "end", size=8)
        end.name = "tracepass.conversation.end"
        end.start_time_unix_nano = end.end_time_unix_nano = t0_ns + TURNS * 1_000_000_000
        _text("gen_ai.conversation.id", conv, end.attributes)
        end.attributes.add(key="tracepass.conversation.turns").value.int_value = TURNS


def request(
    first_conv: int, n_convs: int = CONVERSATIONS_PER_REQUEST, *, prefix: str = "c", **kw: Any
) -> bytes:
    req = ExportTraceServiceRequest()
    rs = req.resource_spans.add()
    rs.resource.attributes.add(key="service.name").value.string_value = "bench-agent"
    spans = rs.scope_spans.add().spans
    for c in range(first_conv, first_conv + n_convs):
        add_conversation(spans, f"{prefix}-{c}", c % TASKS, **kw)
    return req.SerializeToString()


def requests(n: int, *, prefix: str = "c", **kw: Any) -> list[bytes]:
    """`n` 512-span requests of whole conversations (32 each)."""
    return [request(k * CONVERSATIONS_PER_REQUEST, prefix=prefix, **kw) for k in range(n)]


def conversations_per_request(shape: int) -> int:
    """Whole conversations in a ~512-span request: 32 of 16 spans, 56 of ~9 (~504)."""
    return SPANS_PER_REQUEST // shape


def shaped_requests(
    n: int, shape: int, fail_p: float | None, *, prefix: str = "c", **kw: Any
) -> tuple[list[bytes], int, int, int]:
    """(`n` requests of ~512 spans of whole `shape`-span conversations, conversations,
    spans, failing conversations). Counts come from the encoded requests and from
    `conversation_fails`, not from the nominal shape."""
    per = conversations_per_request(shape)
    out = [request(k * per, per, prefix=prefix, shape=shape, fail_p=fail_p, **kw) for k in range(n)]
    spans = 0
    for body in out:
        req = ExportTraceServiceRequest.FromString(body)
        spans += sum(len(ss.spans) for rs in req.resource_spans for ss in rs.scope_spans)
    convs = n * per
    failing = (
        0 if not fail_p else sum(conversation_fails(f"{prefix}-{c}", fail_p) for c in range(convs))
    )
    return out, convs, spans, failing


# ---------------------------------------------------------------------------- the server


def proc_cpu_s(pid: int) -> float:
    """utime + stime of `pid` (all its threads) in seconds, from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def proc_rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/statm", "rb") as f:
        return int(f.read().split()[1]) * PAGE


@dataclass
class Server:
    """A running `tracepass serve` (stop() it)."""

    proc: subprocess.Popen[bytes]
    http_port: int
    metrics_url: str
    workdir: Path
    log: Any = field(repr=False)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def cpu_s(self) -> float:
        return proc_cpu_s(self.pid)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def start_server(
    workdir: Path,
    durability: str,
    *,
    references: bool = True,
    max_open: int = 1_000_000,
    extra_env: dict[str, str] | None = None,
    references_yaml: str | None = None,
    config_overrides: dict[str, Any] | None = None,
) -> Server:
    """`tracepass serve` with a config written into `workdir`: loopback, HTTP only, any
    free ports, the generated reference set, idle timeout 1 h (conversations complete
    by their end marker / reference turn count, never by a timer during a run)."""
    workdir.mkdir(parents=True, exist_ok=True)
    refs = workdir / "references.yaml"
    refs.write_text(references_yaml or reference_set_yaml(), encoding="utf-8")
    config: dict[str, Any] = {
        "references": [str(refs)] if references else [],
        "receiver": {"host": "127.0.0.1", "http_port": 0, "grpc_enabled": False},
        "assembly": {
            "idle_timeout_s": 3600,
            "max_open_conversations": max_open,
            "max_buffered_spans": 50_000_000,
        },
        "state": {"path": str(workdir / "state.sqlite"), "durability": durability},
        "metrics": {"prometheus_host": "127.0.0.1", "prometheus_port": 0},
    }
    for section, values in (config_overrides or {}).items():
        if values is None:
            config.pop(section, None)
        else:
            config[section] = {**config.get(section, {}), **values}
    cfg = workdir / "config.yaml"
    cfg.write_text(json.dumps(config), encoding="utf-8")  # JSON is YAML
    exe = Path(sys.executable).with_name("tracepass")
    log = open(workdir / "serve.log", "wb")  # noqa: SIM115 - closed by Server.stop
    env = {**os.environ, **(extra_env or {})}
    proc = subprocess.Popen(
        [str(exe), "serve", "--config", str(cfg), "--log-level", "warning"],
        stdout=subprocess.PIPE,
        stderr=log,
        env=env,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        log.close()
        raise RuntimeError(f"tracepass serve did not start: see {workdir / 'serve.log'}")
    info = json.loads(line)
    return Server(proc, int(info["http_port"]), str(info["metrics_url"]), workdir, log)


def scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as resp:
        return str(resp.read().decode())


def evaluated(metrics_text: str, agent: str | None = None) -> int:
    """Sum of `tracepass_conversations_total` (optionally of one agent_name)."""
    total = 0.0
    for line in metrics_text.splitlines():
        if line.startswith("tracepass_conversations_total{"):
            if agent is not None and f'agent_name="{agent}"' not in line:
                continue
            total += float(line.rsplit(" ", 1)[1])
    return int(total)


def wait_evaluated(
    server: Server, n: int, *, timeout_s: float = 600.0, every_s: float = 0.1
) -> None:
    deadline = time.monotonic() + timeout_s
    while evaluated(scrape(server.metrics_url)) < n:
        if time.monotonic() > deadline:
            raise TimeoutError(f"/metrics did not show {n} evaluated conversations")
        time.sleep(every_s)


# ---------------------------------------------------------------------------- load generator


@dataclass
class LoadResult:
    wall_s: float
    ok: int
    refused: int  # 503 / 429 answers (each request is retried until accepted)
    other: int
    cpu_s: float = 0.0  # the load generator's own CPU time (its process)


def _send_all(
    port: int,
    payloads: list[bytes],
    concurrency: int,
    rate_rps: float | None,
    go: Callable[[], None] = lambda: None,
) -> LoadResult:
    import aiohttp

    go()  # imports done, payloads in memory: wait for the starting signal
    cpu0 = time.process_time()

    async def run() -> LoadResult:
        url = f"http://127.0.0.1:{port}/v1/traces"
        headers = {"Content-Type": "application/x-protobuf"}
        todo: asyncio.Queue[tuple[int, bytes]] = asyncio.Queue()
        for item in enumerate(payloads):
            todo.put_nowait(item)
        counts = {"ok": 0, "refused": 0, "other": 0}
        t0 = time.perf_counter()
        timeout = aiohttp.ClientTimeout(total=300)
        async with aiohttp.ClientSession(timeout=timeout) as session:

            async def worker() -> None:
                while not todo.empty():
                    k, body = todo.get_nowait()
                    if rate_rps is not None:  # open-loop pacing: request k at k / rate
                        delay = t0 + k / rate_rps - time.perf_counter()
                        if delay > 0:
                            await asyncio.sleep(delay)
                    while True:
                        async with session.post(url, data=body, headers=headers) as resp:
                            await resp.read()
                            status = resp.status
                        if status == 200:
                            counts["ok"] += 1
                            break
                        if status in (429, 503):
                            counts["refused"] += 1
                            await asyncio.sleep(0.05)
                            continue
                        counts["other"] += 1
                        break

            await asyncio.gather(*(worker() for _ in range(concurrency)))
        return LoadResult(
            time.perf_counter() - t0,
            counts["ok"],
            counts["refused"],
            counts["other"],
            time.process_time() - cpu0,
        )

    return asyncio.run(run())


def _child(
    port: int,
    payloads: list[bytes],
    concurrency: int,
    rate: float | None,
    out: Any,
    ready: Any,
    go: Any,
) -> None:
    def wait_for_go() -> None:
        ready.set()
        go.wait()

    out.put(_send_all(port, payloads, concurrency, rate, wait_for_go))


class LoadGenerator:
    """Sends `payloads` from a separate (spawned) process; `result()` waits for it.

    The child's start-up (a new interpreter, aiohttp's import, unpickling the payloads:
    a few hundred ms of CPU) happens before the constructor returns, and sending starts
    at `start()` (at once unless `start=False`), so neither a run's wall time nor the
    generator's reported CPU includes it. Several generators built with `start=False`
    start together."""

    def __init__(
        self,
        port: int,
        payloads: list[bytes],
        *,
        concurrency: int = 8,
        rate_rps: float | None = None,
        start: bool = True,
    ) -> None:
        ctx = mp.get_context("spawn")
        self._out: Any = ctx.Queue()
        ready, self._go = ctx.Event(), ctx.Event()
        self._proc = ctx.Process(
            target=_child,
            args=(port, payloads, concurrency, rate_rps, self._out, ready, self._go),
        )
        self._proc.start()
        if not ready.wait(timeout=120):
            self._proc.kill()
            raise RuntimeError("the load generator did not start")
        if start:
            self.start()

    def start(self) -> None:
        self._go.set()

    def result(self) -> LoadResult:
        self.start()
        res: LoadResult = self._out.get()
        self._proc.join()
        return res
