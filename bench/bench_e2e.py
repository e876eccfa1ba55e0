"""End to end: the real `tracepass serve` process, scored and exported, as users run it.

A load generator in its own process sends 512-span OTLP/HTTP protobuf requests, each
holding 32 whole 3-turn conversations (invoke_agent + 4 execute_tool spans per turn,
plus the end marker) that match a 54-task reference set; scoring, the rolling windows,
Prometheus /metrics and the evaluation events run as configured by default. A run is
counted from the first request until /metrics shows every conversation evaluated; the
figure is the server's CPU time (utime + stime of its pid from /proc, all threads), so
it is the one-core rate and does not depend on what else the machine runs.

Per repetition and durability mode (`none`, `batch`), two runs on fresh servers:
- full: conversations complete and are evaluated → spans per CPU-second;
- ingest only: the same volume, but queries match no reference and no end marker is
  sent, so nothing completes → what receiving + buffering costs. The difference over the
  number of conversations is the CPU per completed conversation beyond ingest.
Same run, same process: the protobuf parse + read-every-attribute baseline
(`_baseline.py`) on the same payloads, in this process's CPU time.

    .venv/bin/python bench/bench_e2e.py [--requests N] [--repeats R] [--concurrency C]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from _baseline import decode_and_read_attributes
from _e2e import (
    CONVERSATIONS_PER_REQUEST,
    SPANS_PER_REQUEST,
    LoadGenerator,
    requests,
    start_server,
    wait_evaluated,
)


def baseline_rate(payloads: list[bytes]) -> float:
    c0 = time.process_time()
    n = decode_and_read_attributes(payloads)
    return n / (time.process_time() - c0)


def run(
    payloads: list[bytes], mode: str, *, complete: bool, concurrency: int, tmp: Path
) -> tuple[float, int, float]:
    """(server CPU seconds, 503/429 answers, wall seconds) of one run on a fresh server."""
    server = start_server(tmp / f"{mode}-{'full' if complete else 'ingest'}", mode)
    try:
        time.sleep(0.3)  # start-up work (imports, reference load) is not counted
        gen = LoadGenerator(server.http_port, payloads, concurrency=concurrency, start=False)
        c0, w0 = server.cpu_s(), time.perf_counter()
        load = gen.result()
        assert load.other == 0, f"{load.other} requests failed"
        if complete:
            # Polled every 0.5 s: each scrape renders every series (and refreshes the
            # pass@k gauges), work a 15 s Prometheus scrape would do 30x less often.
            wait_evaluated(server, len(payloads) * CONVERSATIONS_PER_REQUEST, every_s=0.5)
        return server.cpu_s() - c0, load.refused, time.perf_counter() - w0
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    full = requests(args.requests)
    ingest = requests(args.requests, prefix="i", matching=False, end_marker=False)
    spans = args.requests * SPANS_PER_REQUEST
    convs = args.requests * CONVERSATIONS_PER_REQUEST
    base: list[float] = []
    rate: dict[str, list[float]] = {}
    ingest_rate: dict[str, list[float]] = {}
    beyond: dict[str, list[float]] = {}
    refused: dict[str, list[int]] = {}
    wall: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            base.append(baseline_rate(full))
            for mode in ("none", "batch"):
                where = Path(tmp) / str(r)
                cpu_full, ref, w = run(
                    full, mode, complete=True, concurrency=args.concurrency, tmp=where
                )
                cpu_ing, ref_i, _ = run(
                    ingest, mode, complete=False, concurrency=args.concurrency, tmp=where
                )
                rate.setdefault(mode, []).append(spans / cpu_full)
                ingest_rate.setdefault(mode, []).append(spans / cpu_ing)
                beyond.setdefault(mode, []).append((cpu_full - cpu_ing) / convs * 1e6)
                refused.setdefault(mode, []).append(ref + ref_i)
                wall.setdefault(mode, []).append(w)
    b = statistics.median(base)
    print(
        f"{args.requests} requests x {SPANS_PER_REQUEST} spans = {spans} spans, {convs} "
        f"3-turn conversations per run; median of {args.repeats} [min .. max]"
    )
    print(
        f"{'baseline: protobuf parse + read attributes':<46}: {b:>9,.0f} spans/CPU-s (this process)"
    )
    for mode in ("none", "batch"):
        med = statistics.median(rate[mode])
        print(
            f"{'e2e ' + mode + ': serve CPU, until /metrics shows all':<46}: {med:>9,.0f} "
            f"spans/CPU-s  ({med / b:.3f}x baseline)  [{min(rate[mode]):,.0f} .. "
            f"{max(rate[mode]):,.0f}]"
        )
        ing = statistics.median(ingest_rate[mode])
        print(
            f"{'  ingest only (nothing completes), ' + mode:<46}: {ing:>9,.0f} "
            f"spans/CPU-s  ({ing / b:.3f}x baseline)"
        )
        us = statistics.median(beyond[mode])
        print(
            f"{'  CPU per completed conversation beyond ingest':<46}: {us:>9,.0f} us  "
            f"[{min(beyond[mode]):,.0f} .. {max(beyond[mode]):,.0f}]"
        )
        print(
            f"{'  503/429 answers (full + ingest runs)':<46}: {statistics.median(refused[mode]):>9}"
            f"  [{min(refused[mode])} .. {max(refused[mode])}]; wall of full run "
            f"{statistics.median(wall[mode]):.1f} s"
        )
    print(
        "targets (batch): >= 25,000 spans/CPU-s, >= 0.2x baseline, <= 150 us per "
        "conversation beyond ingest, no 503/429 below capacity"
    )


if __name__ == "__main__":
    main()
