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

With `--postgres URL` (a server whose user may CREATE DATABASE) or `--postgres auto` (a
throw-away cluster, as the tests start one), each repetition also runs `batch` with a
PostgreSQL results store (`$TRACEPASS_RESULTS_URL`, a fresh database per run): counted
until /metrics shows every conversation evaluated AND `tracepass_results_backlog` is 0
(every result committed in PostgreSQL), and reported as a ratio to `batch` with the
state file's results in the same repetition.

    .venv/bin/python bench/bench_e2e.py [--requests N] [--repeats R] [--concurrency C]
        [--postgres URL|auto]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _baseline import decode_and_read_attributes
from _e2e import (
    CONVERSATIONS_PER_REQUEST,
    SPANS_PER_REQUEST,
    LoadGenerator,
    requests,
    scrape,
    start_server,
    wait_evaluated,
)


def baseline_rate(payloads: list[bytes]) -> float:
    c0 = time.process_time()
    n = decode_and_read_attributes(payloads)
    return n / (time.process_time() - c0)


def results_backlog(metrics_text: str) -> float:
    for line in metrics_text.splitlines():
        if line.startswith("tracepass_results_backlog"):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def run(
    payloads: list[bytes],
    mode: str,
    *,
    complete: bool,
    concurrency: int,
    tmp: Path,
    results_url: str | None = None,
) -> tuple[float, int, float]:
    """(server CPU seconds, 503/429 answers, wall seconds) of one run on a fresh server."""
    name = f"{mode}-{'full' if complete else 'ingest'}{'-pg' if results_url else ''}"
    env = {"TRACEPASS_RESULTS_URL": results_url} if results_url else None
    server = start_server(tmp / name, mode, extra_env=env)
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
            while results_url and results_backlog(scrape(server.metrics_url)) > 0:
                time.sleep(0.5)  # until PostgreSQL committed every result
        return server.cpu_s() - c0, load.refused, time.perf_counter() - w0
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--postgres", metavar="URL|auto", default=None)
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
    pg_ratio: list[float] = []
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        new_database = _databases(args.postgres, stack) if args.postgres else None
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
            if new_database is not None:
                cpu_pg, ref_pg, w = run(
                    full,
                    "batch",
                    complete=True,
                    concurrency=args.concurrency,
                    tmp=Path(tmp) / str(r),
                    results_url=new_database(f"bench_e2e_{r}"),
                )
                rate.setdefault("batch+postgres", []).append(spans / cpu_pg)
                refused.setdefault("batch+postgres", []).append(ref_pg)
                wall.setdefault("batch+postgres", []).append(w)
                pg_ratio.append((spans / cpu_pg) / rate["batch"][-1])
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
    if pg_ratio:
        med = statistics.median(rate["batch+postgres"])
        print(
            f"{'e2e batch, PostgreSQL results (until stored)':<46}: {med:>9,.0f} spans/CPU-s"
            f"  ({statistics.median(pg_ratio):.3f}x batch with SQLite results, same "
            f"repetition) [{min(pg_ratio):.3f} .. {max(pg_ratio):.3f}]; 503/429 "
            f"{statistics.median(refused['batch+postgres'])}; wall "
            f"{statistics.median(wall['batch+postgres']):.1f} s"
        )
    print(
        "targets (batch): >= 25,000 spans/CPU-s, >= 0.2x baseline, <= 150 us per "
        "conversation beyond ingest, no 503/429 below capacity"
    )


def _databases(arg: str, stack: contextlib.ExitStack) -> Callable[[str], str]:
    """A function making a fresh database on the server `arg` (or a throw-away cluster
    with `auto`) and returning its URL."""
    import psycopg

    if arg == "auto":
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        from postgres_support import postgres_cluster_running

        arg = stack.enter_context(postgres_cluster_running()).url()

    def create(name: str) -> str:
        with psycopg.connect(arg, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')  # type: ignore[arg-type]
            conn.execute(f'CREATE DATABASE "{name}"')  # type: ignore[arg-type]
        return arg.rsplit("/", 1)[0] + "/" + name

    return create


if __name__ == "__main__":
    main()
