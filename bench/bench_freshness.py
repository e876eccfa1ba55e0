"""Freshness: how long after a conversation's end marker reaches `tracepass serve` its
evaluation shows on /metrics, idle and at ~50 % of measured capacity.

1. Capacity: a short unpaced end-to-end run (`batch`, like bench_e2e.py) gives the
   server's spans per wall second on this machine now (`--capacity wall`, default) and
   per CPU-second (what one core would sustain: `--capacity cpu`). On a shared machine
   the wall figure is the honest one: 50 % of the CPU rate can be more than the core
   share the server actually gets, and then no collector can keep up.
2. Load: a separate load-generator process sends 512-span requests of whole matching
   conversations, paced open-loop at 50 % of that rate, for `--seconds`; meanwhile a
   thread scrapes /metrics every 15 s like Prometheus would.
3. Probes: every 0.5 s this process sends one probe conversation (agent `probe`, all 16
   spans and the end marker in one request) and polls /metrics every `--poll-ms` until
   `tracepass_conversations_total{agent_name="probe"}` grew; freshness is the time from
   just before the POST to the scrape that showed it (so it includes the request's
   group commit, completion, scoring, result storage and metric recording, and is
   quantized by the poll interval).
The same-run baseline is the same probe on the idle server: the ratio is loaded / idle.

With Prometheus scraping every 15 s, a dashboard sees a result after this freshness plus
the wait for the next scrape (uniform in 0..15 s, mean 7.5 s): the scrape dominates, and
this benchmark measures the part tracepass controls.

    .venv/bin/python bench/bench_freshness.py [--seconds S] [--load 0.5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from _e2e import (
    CONVERSATIONS_PER_REQUEST,
    SPANS_PER_REQUEST,
    LoadGenerator,
    Server,
    evaluated,
    request,
    requests,
    scrape,
    start_server,
    wait_evaluated,
)


def capacity(tmp: Path, n: int) -> tuple[float, float]:
    """(spans per server CPU-second, spans per wall second) of an unpaced end-to-end
    `batch` run, counted until /metrics shows every conversation."""
    server = start_server(tmp / "capacity", "batch")
    try:
        time.sleep(0.3)
        gen = LoadGenerator(server.http_port, requests(n), start=False)
        c0, w0 = server.cpu_s(), time.perf_counter()
        gen.result()
        wait_evaluated(server, n * CONVERSATIONS_PER_REQUEST, every_s=0.05)
        spans = n * SPANS_PER_REQUEST
        return spans / (server.cpu_s() - c0), spans / (time.perf_counter() - w0)
    finally:
        server.stop()


def post(port: int, body: bytes) -> None:
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/traces",
        data=body,
        headers={"Content-Type": "application/x-protobuf"},
    )
    while True:
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                resp.read()
                return
        except urllib.error.HTTPError as exc:  # 503 / 429: retry, like an exporter
            if exc.code not in (429, 503):
                raise
            time.sleep(0.05)


def probe_latencies(server: Server, seconds: float, poll_s: float, tag: str) -> list[float]:
    out: list[float] = []
    seen = evaluated(scrape(server.metrics_url), "probe")
    end = time.monotonic() + seconds
    k = 0
    while time.monotonic() < end:
        body = request(k, 1, prefix=f"probe-{tag}", agent="probe")
        k += 1
        t0 = time.perf_counter()
        post(server.http_port, body)
        while evaluated(scrape(server.metrics_url), "probe") <= seen:
            if time.perf_counter() - t0 > 30:
                raise TimeoutError("probe not evaluated within 30 s")
            time.sleep(poll_s)
        out.append(time.perf_counter() - t0)
        seen += 1
        time.sleep(max(0.0, 0.5 - (time.perf_counter() - t0)))
    return out


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--load", type=float, default=0.5, help="fraction of capacity")
    parser.add_argument("--poll-ms", type=float, default=10.0)
    parser.add_argument("--capacity-requests", type=int, default=40)
    parser.add_argument("--capacity", choices=("wall", "cpu"), default="wall")
    args = parser.parse_args()
    poll = args.poll_ms / 1000
    with tempfile.TemporaryDirectory() as tmp:
        cap_cpu, cap_wall = capacity(Path(tmp), args.capacity_requests)
        cap = cap_wall if args.capacity == "wall" else cap_cpu
        rate_rps = args.load * cap / SPANS_PER_REQUEST
        n = max(1, int(rate_rps * args.seconds))
        server = start_server(Path(tmp) / "fresh", "batch")
        try:
            time.sleep(0.3)
            idle = probe_latencies(server, min(10.0, args.seconds / 2), poll, "idle")
            stop = threading.Event()

            def prometheus() -> None:  # the 15 s scrape a real deployment adds
                while not stop.wait(15.0):
                    scrape(server.metrics_url)

            scraper = threading.Thread(target=prometheus, daemon=True)
            scraper.start()
            c0, w0 = server.cpu_s(), time.perf_counter()
            load = LoadGenerator(server.http_port, requests(n), rate_rps=rate_rps)
            loaded = probe_latencies(server, args.seconds, poll, "load")
            result = load.result()
            busy = (server.cpu_s() - c0) / (time.perf_counter() - w0)
            stop.set()
        finally:
            server.stop()
    print(
        f"capacity (batch, unpaced): {cap_wall:,.0f} spans per wall second, {cap_cpu:,.0f} per "
        f"serve CPU-second; load {args.load:.0%} of the {args.capacity} figure = "
        f"{rate_rps:.1f} requests/s x {SPANS_PER_REQUEST} spans for {args.seconds:.0f} s; "
        f"server busy {busy:.0%} of one core; 503/429 answers: {result.refused}"
    )
    print(f"poll interval {args.poll_ms:.0f} ms (latencies are quantized by it)")
    i50, i99 = pct(idle, 0.5), pct(idle, 0.99)
    l50, l99 = pct(loaded, 0.5), pct(loaded, 0.99)
    print(
        f"{'idle (baseline)':<24}: p50 {i50 * 1e3:6.0f} ms  p99 {i99 * 1e3:6.0f} ms  ({len(idle)} probes)"
    )
    print(
        f"{'at ' + format(args.load, '.0%') + ' load':<24}: p50 {l50 * 1e3:6.0f} ms  p99 "
        f"{l99 * 1e3:6.0f} ms  ({len(loaded)} probes; p50 {l50 / i50:.1f}x idle, p99 "
        f"{l99 / i99:.1f}x idle; max {max(loaded) * 1e3:.0f} ms, mean "
        f"{statistics.mean(loaded) * 1e3:.0f} ms)"
    )
    print("target: p99 <= 250 ms at 50 % load (a 15 s scrape adds 0..15 s on top)")


if __name__ == "__main__":
    main()
