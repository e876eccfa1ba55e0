"""Memory at a steady rate: the real `tracepass serve` with default settings, as users run it.

A load generator in its own process sends whole 3-turn conversations of ~10 spans
(invoke_agent + 1-3 execute_tool per turn, 2 on average, plus the end marker) as
OTLP/JSON over HTTP at a steady rate (default 150 conversations/s, open loop: request k
is due at k / rate), matching a 54-task reference set (every 5th conversation fails).
So that it delivers that rate on a busy 2-core machine, every request body is encoded
before the run (one file, memory-mapped; ~7 KB per conversation) and sent by a lean
HTTP/1.1 client: raw asyncio streams, `--connections` kept-alive connections, no
per-request work but a slice and a status line. It reports what it actually delivered
(conversations acknowledged per second) and how far behind its schedule it fell.

`--before TREE` runs a second server from another source tree (e.g. `git worktree add
/tmp/base 68c296e`) side by side, started together, with its own generator sending the
same payloads: both see the same machine.
The server's config sets only what a benchmark must (loopback ports, the reference set,
the state file): assembly limits, `retention_s` (1 h), durability (`batch`) and every
other setting are the defaults. So evaluated conversations accumulate in the retention
window for the whole run: with `batch` their records stay in the state file and a
retained conversation costs ≈ 170 bytes of memory (assembly/retention.py); the rolling
windows add an entry per conversation for 24 h.

Printed, every `--every` seconds and per server: its RSS (VmRSS, /proc), conversations
delivered (acknowledged) and the rate since the last sample, and, from /metrics,
conversations evaluated and the gauges `tracepass_buffered_spans`,
`tracepass_retained_spans` and `tracepass_window_entries` (those that exist). The
same-run baseline is the RSS right after start-up; flatness is max/min - 1 of the RSS
samples over the last third of the run, and how far they stray from their mean.

    .venv/bin/python bench/bench_soak.py [--minutes 3] [--rate 150] [--every 10]
    .venv/bin/python bench/bench_soak.py --minutes 15 --every 30 --before /tmp/base  # the issue's
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import mmap
import multiprocessing as mp
import os
import subprocess
import sys
import tempfile
import time
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _e2e import TASKS, Server, proc_rss_bytes, scrape, start_server

ROOT = Path(__file__).resolve().parents[1]

CONVERSATIONS_PER_REQUEST = 10
GAUGES = (
    "tracepass_buffered_spans",
    "tracepass_retained_spans",
    "tracepass_window_entries",
)


def _conversation_template(task: int) -> tuple[str, list[str]]:
    """One conversation of `task` as OTLP/JSON span objects (comma-separated) with the
    conversation id "@C@", and the hex ids in it (replaced per conversation)."""
    from google.protobuf import json_format
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    from _e2e import add_conversation

    req = ExportTraceServiceRequest()
    spans = req.resource_spans.add().scope_spans.add().spans
    add_conversation(spans, "@C@", task, shape=9, end_marker=True, t0_ns=time.time_ns())
    ids: list[str] = []
    docs = []
    for span in json_format.MessageToDict(req)["resourceSpans"][0]["scopeSpans"][0]["spans"]:
        for key in ("traceId", "spanId", "parentSpanId"):  # OTLP/JSON: hex, not base64
            if key in span:
                span[key] = base64.b64decode(span[key]).hex()
                if span[key] not in ids:
                    ids.append(span[key])
        docs.append(json.dumps(span, separators=(",", ":")))
    return ",".join(docs), ids


_TEMPLATES: dict[int, tuple[str, list[str]]] = {}


def json_request(first: int) -> bytes:
    """One OTLP/JSON request of `CONVERSATIONS_PER_REQUEST` ~10-span conversations
    (s-<first> ...). Built from a per-task template by replacing the conversation id and
    the ids' leading hex digits with the conversation number (unique ids per
    conversation): the load generator must keep up with the rate on a busy machine."""
    parts = []
    for c in range(first, first + CONVERSATIONS_PER_REQUEST):
        task = c % TASKS
        if task not in _TEMPLATES:
            _TEMPLATES[task] = _conversation_template(task)
        text, ids = _TEMPLATES[task]
        text = text.replace('"@C@"', f'"s-{c}"')
        for old in ids:
            text = text.replace(old, f"{c:08x}{old[8:]}")
        parts.append(text)
    return (
        '{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":'
        '{"stringValue":"soak-agent"}}]},"scopeSpans":[{"spans":[' + ",".join(parts) + "]}]}]}"
    ).encode()


# ------------------------------------------------------------------ payloads and sender


def build_payloads(path: Path, requests: int) -> int:
    """Encode every request body of the run before it starts, into one file (each body's
    offset in `<path>.idx`, native int64): a generator then sends slices of a memory map
    and spends no CPU on encoding, and the before and after generators share one copy
    in the page cache. Returns the file's size."""
    offsets = array("q", [0])
    with open(path, "wb") as f:
        for k in range(requests):
            body = json_request(k * CONVERSATIONS_PER_REQUEST)
            f.write(body)
            offsets.append(offsets[-1] + len(body))
    path.with_suffix(".idx").write_bytes(offsets.tobytes())
    return offsets[-1]


class _Closed(Exception):
    """The server closed the connection (refusals may hang up): reconnect, resend."""


async def _exchange(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, head: bytes, body: memoryview
) -> tuple[int, bool]:
    """One HTTP/1.1 request on a kept-alive connection: (status, server closes)."""
    writer.write(head + str(len(body)).encode() + b"\r\n\r\n")
    writer.write(body)
    await writer.drain()
    status_line = await reader.readline()
    if not status_line:
        raise _Closed
    status = int(status_line.split()[1])
    length, close = 0, False
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b""):
            break
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            length = int(value)
        elif name == b"connection" and value.strip().lower() == b"close":
            close = True
    if length:
        await reader.readexactly(length)
    return status, close


def _load_payloads(payloads: Path) -> tuple[memoryview, array[int]]:
    """The pre-encoded bodies (memory-mapped, shared page cache) and their offsets."""
    with open(payloads, "rb") as f:
        view = memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))
    offsets = array("q")
    offsets.frombytes(payloads.with_suffix(".idx").read_bytes())
    return view, offsets


async def _send_all(
    port: int,
    bodies: tuple[memoryview, array[int]],
    rps: float,
    n: int,
    connections: int,
    acked: Any,
    stop: Any,
) -> dict[str, float]:
    """Open loop: request k is due at k / rps after the start; `connections` kept-alive
    connections each take the next due request when free. A request that leaves after
    its time counts how far behind the schedule the generator is."""
    view, offsets = bodies
    head = (
        f"POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        "Content-Type: application/json\r\nContent-Length: "
    ).encode()
    report = dict.fromkeys(
        ("ok", "refused", "failed", "reconnects", "behind_max_s", "behind_end_s", "last_ack_s"),
        0.0,
    )
    due = iter(range(n))  # shared by the connections: each takes the next request
    t0 = time.perf_counter()

    async def connection() -> None:
        conn: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        for k in due:
            if stop.is_set():
                break
            delay = t0 + k / rps - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            report["behind_end_s"] = behind = max(0.0, -delay)
            report["behind_max_s"] = max(report["behind_max_s"], behind)
            body = view[offsets[k] : offsets[k + 1]]
            while not stop.is_set():
                try:
                    if conn is None:
                        conn = await asyncio.open_connection("127.0.0.1", port)
                    status, close = await _exchange(*conn, head, body)
                except (OSError, asyncio.IncompleteReadError, _Closed):
                    if conn is not None:
                        conn[1].close()
                    conn = None
                    report["reconnects"] += 1
                    await asyncio.sleep(0.05)
                    continue
                if close:
                    conn[1].close()
                    conn = None
                if status == 200:
                    report["ok"] += 1
                    acked.value += CONVERSATIONS_PER_REQUEST
                    report["last_ack_s"] = time.perf_counter() - t0
                    break
                if status in (429, 503):  # the server's back-pressure: retried
                    report["refused"] += 1
                    await asyncio.sleep(0.05)
                    continue
                report["failed"] += 1
                break
        if conn is not None:
            conn[1].close()

    await asyncio.gather(*(connection() for _ in range(connections)))
    return report


def _generator(
    port: int,
    payloads: Path,
    rps: float,
    n: int,
    connections: int,
    acked: Any,
    out: Any,
    ready: Any,
    go: Any,
    stop: Any,
) -> None:
    """Child process: one generator per server (its own core time, its own GIL)."""
    bodies = _load_payloads(payloads)
    ready.set()
    go.wait()
    out.put(asyncio.run(_send_all(port, bodies, rps, n, connections, acked, stop)))


def gauges(text: str) -> dict[str, float]:
    found: dict[str, float] = {}
    evaluated = 0.0
    for line in text.splitlines():
        if line.startswith("tracepass_conversations_total{"):
            evaluated += float(line.rsplit(" ", 1)[1])
            continue
        for name in GAUGES:
            if line.startswith(name) and line[len(name)] in " {":
                found[name] = found.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
    found["evaluated"] = evaluated
    return found


def source_env(tree: Path) -> dict[str, str]:
    """The environment that makes `tracepass serve` import `tree`'s sources (this
    tree's venv supplies the dependencies: the trees share `uv.lock`)."""
    parts = [str(tree / d / "src") for d in ("instrumentation", "evaluator", "collector")]
    env = {"PYTHONPATH": os.pathsep.join(parts)}
    code = (
        "import tracepass.collector as c, tracepass.evaluator as e; print(c.__file__, e.__file__)"
    )
    probe = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    if not all(path.startswith(str(tree)) for path in probe):
        raise RuntimeError(f"{tree}: tracepass imports from {probe} instead")
    return env


@dataclass
class Side:
    """One server under test, its generator and its samples."""

    name: str
    server: Server
    rss0: int
    cpu0: float
    acked: Any  # conversations acknowledged so far (shared with the generator)
    ready: Any
    out: Any
    child: Any
    samples: list[tuple[float, int, dict[str, float]]] = field(default_factory=list)


def _band(rss: list[int]) -> str:
    mean = sum(rss) / len(rss)
    return (
        f"{min(rss) / 1e6:,.0f} .. {max(rss) / 1e6:,.0f} MB (max/min - 1 = "
        f"{max(rss) / min(rss) - 1:.1%}; every sample within "
        f"±{max(abs(r / mean - 1) for r in rss):.1%} of their mean {mean / 1e6:,.0f} MB)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=3.0)
    parser.add_argument("--rate", type=float, default=150.0, help="conversations per second")
    parser.add_argument("--every", type=float, default=10.0, help="seconds between samples")
    parser.add_argument("--connections", type=int, default=8, help="per generator")
    parser.add_argument(
        "--before", type=Path, help="also run a server from this source tree, side by side"
    )
    args = parser.parse_args()
    rps = args.rate / CONVERSATIONS_PER_REQUEST
    n = int(args.minutes * 60 * rps)
    trees = [("after", ROOT)]
    if args.before is not None:
        trees.insert(0, ("before", args.before.resolve()))
    envs = {name: source_env(tree) for name, tree in trees}
    with tempfile.TemporaryDirectory() as tmp:
        payloads = Path(tmp) / "payloads.bin"
        cpu = time.process_time()
        size = build_payloads(payloads, n)
        print(
            f"payloads: {n:,} requests of {CONVERSATIONS_PER_REQUEST} conversations "
            f"({size / 1e6:,.0f} MB of OTLP/JSON) encoded before the run in "
            f"{time.process_time() - cpu:.0f} s CPU"
        )
        ctx = mp.get_context("spawn")
        go, stop = ctx.Event(), ctx.Event()
        sides: list[Side] = []
        try:
            for name, tree in trees:
                server = start_server(
                    Path(tmp) / name,
                    "batch",
                    references=True,
                    config_overrides={"assembly": None, "state": {"durability": "batch"}},
                    extra_env=envs[name],
                )
                acked, ready, out = ctx.RawValue("q", 0), ctx.Event(), ctx.Queue()
                child = ctx.Process(
                    target=_generator,
                    args=(server.http_port, payloads, rps, n, args.connections, *(acked, out)),
                    kwargs={"ready": ready, "go": go, "stop": stop},
                )
                sides.append(Side(name, server, 0, 0.0, acked, ready, out, child))
                print(f"{name}: tracepass serve (pid {server.pid}) from {tree}")
            time.sleep(1.0)
            for side in sides:
                side.rss0 = proc_rss_bytes(side.server.pid)
                side.cpu0 = side.server.cpu_s()
                side.child.start()
            for side in sides:
                if not side.ready.wait(120):
                    raise RuntimeError(f"{side.name}: the load generator did not start")
            print(
                f"soak: {args.rate:.0f} conversations/s x ~10 spans (OTLP/JSON, "
                f"{CONVERSATIONS_PER_REQUEST} per request, {args.connections} kept-alive "
                f"connections per generator), {args.minutes:g} min, serve with default "
                "assembly/retention settings, batch durability"
            )
            for side in sides:
                print(f"baseline {side.name}: RSS after start-up {side.rss0 / 1e6:,.0f} MB")
            print(
                f"{'t (s)':>6} {'server':>6} {'RSS MB':>7} {'x start':>7} {'delivered':>10} "
                f"{'conv/s':>7} {'evaluated':>10} "
                + " ".join(f"{g.removeprefix('tracepass_'):>15}" for g in GAUGES)
            )
            go.set()
            t0 = time.monotonic()
            step = 0
            while True:
                step += 1
                time.sleep(max(0.0, t0 + step * args.every - time.monotonic()))
                t = time.monotonic() - t0
                for side in sides:
                    rss = proc_rss_bytes(side.server.pid)
                    g = gauges(scrape(side.server.metrics_url))
                    g["delivered"] = float(side.acked.value)
                    before = side.samples[-1] if side.samples else (0.0, 0, {"delivered": 0.0})
                    rate = (g["delivered"] - before[2]["delivered"]) / (t - before[0])
                    side.samples.append((t, rss, g))
                    cols = " ".join(
                        f"{g[name]:>15,.0f}" if name in g else f"{'-':>15}" for name in GAUGES
                    )
                    print(
                        f"{t:>6.0f} {side.name:>6} {rss / 1e6:>7,.0f} {rss / side.rss0:>7.2f} "
                        f"{g['delivered']:>10,.0f} {rate:>7,.0f} {g['evaluated']:>10,.0f} {cols}",
                        flush=True,
                    )
                if t >= args.minutes * 60 or not any(s.child.is_alive() for s in sides):
                    break
            stop.set()
            reports = {side.name: side.out.get(timeout=600) for side in sides}
            for side in sides:
                side.child.join()
            cpus = {side.name: side.server.cpu_s() - side.cpu0 for side in sides}
        finally:
            stop.set()
            for side in sides:
                side.server.stop()
    for side in sides:
        _summary(side, reports[side.name], cpus[side.name], n)
    print(
        "target (15 min at 150 conversations/s): RSS <= 400 MB, flat within ±10 % over the "
        "last 5 min"
    )


def _summary(side: Side, report: dict[str, float], cpu: float, planned: int) -> None:
    t_end, rss_end, g = side.samples[-1]
    tail = [rss for t, rss, _ in side.samples if t >= t_end * 2 / 3]
    sent_s = report["last_ack_s"] or 1.0
    print(f"--- {side.name}")
    print(
        f"delivered: {report['ok'] * CONVERSATIONS_PER_REQUEST:,.0f} conversations acknowledged "
        f"in {sent_s:.0f} s = {report['ok'] * CONVERSATIONS_PER_REQUEST / sent_s:.1f} "
        f"conversations/s ({report['ok']:,.0f} of {planned:,} requests planned; "
        f"{report['refused']:,.0f} answered 503/429 and {report['reconnects']:,.0f} "
        f"connection losses, retried; {report['failed']:,.0f} failed); behind its schedule "
        f"by at most {report['behind_max_s']:.2f} s, {report['behind_end_s']:.2f} s at the end"
    )
    print(f"server CPU over the run: {cpu:.1f} s ({cpu / t_end:.0%} of a core)")
    print(
        f"RSS at {t_end:.0f} s: {rss_end / 1e6:,.0f} MB ({rss_end / side.rss0:.2f}x start); "
        f"evaluated {g['evaluated']:,.0f}; "
        + ", ".join(f"{name} {g[name]:,.0f}" for name in GAUGES if name in g)
    )
    print(f"last third ({t_end - t_end * 2 / 3:.0f} s): {_band(tail)}")


if __name__ == "__main__":
    main()
