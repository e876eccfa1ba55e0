"""Scale-out: two `tracepass serve` processes, each fed half of the conversations
(partitioned by conversation, as a load balancer hashing `gen_ai.conversation.id`
would), against one process fed all of them, in the same run.

Each server gets its own load-generator process (8 concurrent 512-span OTLP/HTTP
requests of whole matching 3-turn conversations, `batch` durability); a run lasts from
the first request until every server's /metrics shows all its conversations evaluated.
The figure is completed spans per wall second, two processes over one: it is bounded by
the cores the machine gives (2 here, shared with the load generators and everything
else running), so the servers' CPU-seconds are printed too — the per-span CPU of the
halves against the whole tells whether partitioning itself costs anything, and so are
the cores the one-process run kept busy (its server and its load generator, CPU over
wall): two such runs cannot beat `cores / that` on this machine, whatever the design.

    .venv/bin/python bench/bench_scaleout.py [--requests N] [--repeats R]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from _e2e import (
    CONVERSATIONS_PER_REQUEST,
    SPANS_PER_REQUEST,
    LoadGenerator,
    requests,
    start_server,
    wait_evaluated,
)


def run(parts: list[list[bytes]], tmp: Path) -> tuple[float, float, float]:
    """(wall seconds until every server showed all its conversations, server CPU-s,
    load generators' CPU-s)."""
    servers = [start_server(tmp / f"s{i}", "batch") for i in range(len(parts))]
    try:
        loads = [
            LoadGenerator(s.http_port, p, start=False) for s, p in zip(servers, parts, strict=True)
        ]
        time.sleep(0.3)
        c0 = [s.cpu_s() for s in servers]
        w0 = time.perf_counter()
        for load in loads:
            load.start()
        load_cpu = 0.0
        for s, p, load in zip(servers, parts, loads, strict=True):
            res = load.result()
            assert res.other == 0
            load_cpu += res.cpu_s
            wait_evaluated(s, len(p) * CONVERSATIONS_PER_REQUEST, every_s=0.05)
        wall = time.perf_counter() - w0
        return wall, sum(s.cpu_s() - c for s, c in zip(servers, c0, strict=True)), load_cpu
    finally:
        for s in servers:
            s.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=160)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    data = requests(args.requests)
    spans = args.requests * SPANS_PER_REQUEST
    one_rate, two_rate, one_cpu, two_cpu, one_cores = [], [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            w1, c1, g1 = run([data], Path(tmp) / f"one{r}")
            w2, c2, _ = run([data[0::2], data[1::2]], Path(tmp) / f"two{r}")
            one_cores.append((c1 + g1) / w1)
            one_rate.append(spans / w1)
            two_rate.append(spans / w2)
            one_cpu.append(spans / c1)
            two_cpu.append(spans / c2)
    o, t = statistics.median(one_rate), statistics.median(two_rate)
    ratios = [b / a for a, b in zip(one_rate, two_rate, strict=True)]
    print(
        f"{spans:,} spans ({args.requests} requests) per run, batch durability; median of "
        f"{args.repeats}; {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}"
    )
    print(f"{'one process (baseline)':<34}: {o:>9,.0f} spans per wall second")
    print(
        f"{'two processes, halves':<34}: {t:>9,.0f} spans per wall second  "
        f"({statistics.median(ratios):.2f}x one) [{min(ratios):.2f} .. {max(ratios):.2f}]"
    )
    print(
        f"{'server CPU, one / two':<34}: {statistics.median(one_cpu):>9,.0f} / "
        f"{statistics.median(two_cpu):,.0f} spans per CPU-second (sum over servers)"
    )
    cores = os.cpu_count() or 1
    used = statistics.median(one_cores)
    print(
        f"{'cores busy in the one-process run':<34}: {used:>9.2f} (server + its load "
        f"generator) -> on {cores} cores two runs can reach at most "
        f"{min(2.0, cores / used):.2f}x one"
    )
    print("target: two processes >= 1.8x one")


if __name__ == "__main__":
    main()
