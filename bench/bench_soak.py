"""Memory at a steady rate: the real `tracepass serve` with default settings, as users run it.

A load generator in its own process sends whole 3-turn conversations of ~10 spans
(invoke_agent + 1-3 execute_tool per turn, 2 on average, plus the end marker) as
OTLP/JSON over HTTP at a steady rate (default 150 conversations/s, open loop: request k
leaves at k / rate), matching a 54-task reference set (every 5th conversation fails).
The server's config sets only what a benchmark must (loopback ports, the reference set,
the state file): assembly limits, `retention_s` (1 h), durability (`batch`) and every
other setting are the defaults. So evaluated conversations accumulate in the retention
window for the whole run: with `batch` their records stay in the state file and a
retained conversation costs ≈ 170 bytes of memory (assembly/retention.py); the rolling
windows add an entry per conversation for 24 h.

Printed, every `--every` seconds: the server's RSS (VmRSS, /proc) and, from /metrics,
conversations evaluated and the gauges `tracepass_buffered_spans`,
`tracepass_retained_spans` and `tracepass_window_entries` (those that exist). The
same-run baseline is the RSS right after start-up; flatness is max/min - 1 of the RSS
samples over the last third of the run, and how far they stray from their mean.

    .venv/bin/python bench/bench_soak.py [--minutes 3] [--rate 150] [--every 10]
    .venv/bin/python bench/bench_soak.py --minutes 15     # the issue's run
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import multiprocessing as mp
import tempfile
import time
from pathlib import Path
from typing import Any

from _e2e import TASKS, proc_rss_bytes, scrape, start_server

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


def _sender(port: int, rate_rps: float, n: int, out: Any, ready: Any, go: Any, stop: Any) -> None:
    """Child process: send `n` requests at `rate_rps`, each built just before it leaves."""
    import aiohttp

    ready.set()
    go.wait()

    async def run() -> tuple[int, int, int, float]:
        url = f"http://127.0.0.1:{port}/v1/traces"
        headers = {"Content-Type": "application/json"}
        ok = refused = other = 0
        late = 0.0
        t0 = time.perf_counter()
        # At most 8 connections (a client's exporter pool): requests beyond wait for one.
        connector = aiohttp.TCPConnector(limit=8)
        timeout = aiohttp.ClientTimeout(total=300)
        async with aiohttp.ClientSession(timeout=timeout, connector=connector) as s:
            pending: set[asyncio.Task[None]] = set()

            async def send(body: bytes) -> None:
                nonlocal ok, refused, other
                while True:
                    try:
                        async with s.post(url, data=body, headers=headers) as resp:
                            await resp.read()
                    except aiohttp.ClientError:  # connection closed by the server: retried
                        refused += 1
                        await asyncio.sleep(0.05)
                        continue
                    if resp.status == 200:
                        ok += 1
                        return
                    if resp.status in (429, 503):
                        refused += 1
                        await asyncio.sleep(0.05)
                        continue
                    other += 1
                    return

            for k in range(n):
                if stop.is_set():  # the run is over: what was not sent is not sent
                    break
                delay = t0 + k / rate_rps - time.perf_counter()
                late = max(late, -delay)
                await asyncio.sleep(max(0.0, delay))  # always yield: the sends must run
                while len(pending) >= 64:  # far behind: wait instead of piling up requests
                    await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                task = asyncio.create_task(send(json_request(k * CONVERSATIONS_PER_REQUEST)))
                pending.add(task)
                task.add_done_callback(pending.discard)
            await asyncio.gather(*pending)
        return ok, refused, other, late

    out.put(asyncio.run(run()))


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=3.0)
    parser.add_argument("--rate", type=float, default=150.0, help="conversations per second")
    parser.add_argument("--every", type=float, default=10.0, help="seconds between samples")
    args = parser.parse_args()
    rps = args.rate / CONVERSATIONS_PER_REQUEST
    n = int(args.minutes * 60 * rps)
    with tempfile.TemporaryDirectory() as tmp:
        server = start_server(
            Path(tmp) / "soak",
            "batch",
            references=True,
            config_overrides={"assembly": None, "state": {"durability": "batch"}},
        )
        try:
            time.sleep(1.0)
            rss0 = proc_rss_bytes(server.pid)
            cpu0 = server.cpu_s()
            ctx = mp.get_context("spawn")
            out, ready, go, stop = ctx.Queue(), ctx.Event(), ctx.Event(), ctx.Event()
            child = ctx.Process(
                target=_sender, args=(server.http_port, rps, n, out, ready, go, stop)
            )
            child.start()
            if not ready.wait(120):
                child.kill()
                raise RuntimeError("the load generator did not start")
            print(
                f"soak: {args.rate:.0f} conversations/s x ~10 spans (OTLP/JSON, "
                f"{CONVERSATIONS_PER_REQUEST} per request), {args.minutes:g} min, serve with "
                f"default assembly/retention settings, batch durability"
            )
            print(f"baseline: RSS after start-up {rss0 / 1e6:,.0f} MB")
            header = f"{'t (s)':>6} {'RSS MB':>8} {'x start':>8} {'evaluated':>10} " + " ".join(
                f"{g.removeprefix('tracepass_'):>15}" for g in GAUGES
            )
            print(header)
            go.set()
            t0 = time.monotonic()
            samples: list[tuple[float, int]] = []
            while True:
                time.sleep(max(0.0, t0 + (len(samples) + 1) * args.every - time.monotonic()))
                t = time.monotonic() - t0
                rss = proc_rss_bytes(server.pid)
                g = gauges(scrape(server.metrics_url))
                samples.append((t, rss))
                cols = " ".join(
                    f"{g[name]:>15,.0f}" if name in g else f"{'-':>15}" for name in GAUGES
                )
                print(
                    f"{t:>6.0f} {rss / 1e6:>8,.0f} {rss / rss0:>8.2f} "
                    f"{g['evaluated']:>10,.0f} {cols}",
                    flush=True,
                )
                if not child.is_alive() or t >= args.minutes * 60:
                    break
            stop.set()
            ok, refused, other, late = out.get(timeout=600)
            child.join()
            cpu = server.cpu_s() - cpu0
        finally:
            server.stop()
    tail = [rss for t, rss in samples if t >= samples[-1][0] * 2 / 3]
    print(
        f"requests: {ok:,} ok, {refused:,} answered 503/429 or reset (retried), {other} failed; "
        f"the sender fell behind its schedule by at most {late:.1f} s (of {n:,} requests "
        "planned, the rest were not sent)"
    )
    print(f"server CPU over the run: {cpu:.1f} s ({cpu / samples[-1][0]:.0%} of a core)")
    print(
        f"RSS at the end {samples[-1][1] / 1e6:,.0f} MB ({samples[-1][1] / rss0:.2f}x start); "
        f"last third of the run: {min(tail) / 1e6:,.0f} .. {max(tail) / 1e6:,.0f} MB "
        f"(max/min - 1 = {max(tail) / min(tail) - 1:.1%}; every sample within "
        f"±{max(abs(r / (sum(tail) / len(tail)) - 1) for r in tail):.1%} of their mean)"
    )
    print(
        "target (15 min at 150 conversations/s): RSS <= 400 MB, flat within 10 % over the last 5 min"
    )


if __name__ == "__main__":
    main()
