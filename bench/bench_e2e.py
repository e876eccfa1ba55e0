"""End to end: the real `tracepass serve` process, scored and exported, as users run it.

A load generator in its own process sends ~512-span OTLP/HTTP protobuf requests of whole
3-turn conversations that match a 54-task reference set; scoring, the rolling windows,
Prometheus /metrics and the evaluation events run as configured by default. A run is
counted from the first request until /metrics shows every conversation evaluated; the
figure is the server's CPU time (utime + stime of its pid from /proc, all threads), so
it is the one-core rate and depends much less than wall time on what else the machine
runs (it still moves with cache and memory-bandwidth contention: compare the ratios).

Two axes (issue 27):
- shape: `16` = 3 turns x (invoke_agent + 4 execute_tool) + the end marker; `9` = 3
  turns x (invoke_agent + 1-3 execute_tool), no end marker (completed when the matched
  reference's 3 turns have arrived);
- failures: `pass` = none; `mix` = each turn has a wrong tool argument with probability
  0.1 and a wrong answer with probability 0.1 (~47 % of conversations fail).

Per repetition, durability mode and shape, three runs on fresh servers, interleaved:
- pass, mix: conversations complete and are evaluated -> spans per CPU-second;
- ingest only: the same conversations sent to a server whose references match nothing
  (9: the very same payloads, which then never complete; 16: a 5th tool span instead of
  the end marker, which would complete them) -> what receiving + buffering costs.
CPU per completed conversation beyond ingest = (run CPU - ingest CPU) / conversations;
for failing conversations it is solved from the mix: (mix - (1 - f) x pass) / f, with f
the mix's failing share. Same run, same process: the protobuf parse + read-every-
attribute baseline (`_baseline.py`) on the 16-span payloads, this process's CPU time.

With `--postgres URL` (a server whose user may CREATE DATABASE) or `--postgres auto` (a
throw-away cluster, as the tests start one), each repetition also runs the mix with
`batch` and a PostgreSQL results store (`$TRACEPASS_RESULTS_URL`, a fresh database per
run): counted until /metrics shows every conversation evaluated AND
`tracepass_results_backlog` is 0 (every result committed in PostgreSQL), and reported as
a ratio to the same mix with the state file's results in the same repetition.

    .venv/bin/python bench/bench_e2e.py [--requests N] [--repeats R] [--concurrency C]
        [--shapes 9,16] [--modes batch,none] [--postgres URL|auto]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from _baseline import decode_and_read_attributes
from _e2e import (
    LoadGenerator,
    reference_set_yaml,
    scrape,
    shaped_requests,
    start_server,
    wait_evaluated,
)

FAIL_P = 0.1  # per turn: wrong tool argument; independently, wrong answer


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
    shape: int,
    complete: int,
    concurrency: int,
    tmp: Path,
    results_url: str | None = None,
) -> tuple[float, int, float]:
    """(server CPU seconds, 503/429 answers, wall seconds) of one run on a fresh server;
    `complete` = conversations to wait for in /metrics (0: ingest only, whose server's
    references match nothing)."""
    refs = reference_set_yaml(shape=shape, unmatched=not complete)
    env = {"TRACEPASS_RESULTS_URL": results_url} if results_url else None
    server = start_server(tmp, mode, references_yaml=refs, extra_env=env)
    try:
        time.sleep(0.3)  # start-up work (imports, reference load) is not counted
        gen = LoadGenerator(server.http_port, payloads, concurrency=concurrency, start=False)
        c0, w0 = server.cpu_s(), time.perf_counter()
        load = gen.result()
        assert load.other == 0, f"{load.other} requests failed"
        if complete:
            # Polled every 0.5 s: each scrape renders every series (and refreshes the
            # pass@k gauges), work a 15 s Prometheus scrape would do 30x less often.
            wait_evaluated(server, complete, every_s=0.5)
            while results_url and results_backlog(scrape(server.metrics_url)) > 0:
                time.sleep(0.5)  # until PostgreSQL committed every result
        return server.cpu_s() - c0, load.refused, time.perf_counter() - w0
    finally:
        server.stop()


@dataclass
class Series:
    """One (mode, shape)'s figures over the repetitions."""

    rate_pass: list[float] = field(default_factory=list)  # spans/CPU-s
    rate_mix: list[float] = field(default_factory=list)
    rate_ingest: list[float] = field(default_factory=list)
    us_pass: list[float] = field(default_factory=list)  # per conversation beyond ingest
    us_mix: list[float] = field(default_factory=list)
    us_failing: list[float] = field(default_factory=list)
    refused: list[int] = field(default_factory=list)
    wall_mix: list[float] = field(default_factory=list)
    pg_ratio: list[float] = field(default_factory=list)  # mix rate, PostgreSQL / SQLite


def _med(xs: list[float]) -> str:
    return f"{statistics.median(xs):>9,.0f}  [{min(xs):,.0f} .. {max(xs):,.0f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--shapes", default="9,16", help="spans per conversation: 9, 16")
    parser.add_argument("--modes", default="batch", help="durability modes: batch, none")
    parser.add_argument("--postgres", metavar="URL|auto", default=None)
    args = parser.parse_args()
    shapes = [int(x) for x in args.shapes.split(",")]
    modes = args.modes.split(",")
    work = {}
    for shape in shapes:
        passing, convs, spans, _ = shaped_requests(args.requests, shape, 0.0)
        mix, convs_m, spans_m, failing = shaped_requests(args.requests, shape, FAIL_P)
        ingest, _, spans_i, _ = shaped_requests(
            args.requests, shape, FAIL_P, prefix="i", end_marker=False
        )
        assert (convs, spans) == (convs_m, spans_m), "pass and mix differ in volume"
        work[shape] = (passing, mix, ingest, convs, spans, spans_i, failing)
    base_payloads = shaped_requests(args.requests, 16, None)[0]
    base: list[float] = []
    series: dict[tuple[str, int], Series] = {}
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        new_database = _databases(args.postgres, stack) if args.postgres else None
        for r in range(args.repeats):
            base.append(baseline_rate(base_payloads))
            for mode in modes:
                for shape in shapes:
                    passing, mix, ingest, convs, spans, spans_i, failing = work[shape]
                    where = Path(tmp) / f"{r}-{mode}-{shape}"
                    kw = {"shape": shape, "concurrency": args.concurrency}
                    cpu_p, ref_p, _ = run(passing, mode, complete=convs, tmp=where / "p", **kw)
                    cpu_m, ref_m, w = run(mix, mode, complete=convs, tmp=where / "m", **kw)
                    cpu_i, ref_i, _ = run(ingest, mode, complete=0, tmp=where / "i", **kw)
                    cpu_i *= spans / spans_i  # 16: the 5th tool span replaces the marker
                    s = series.setdefault((mode, shape), Series())
                    s.rate_pass.append(spans / cpu_p)
                    s.rate_mix.append(spans / cpu_m)
                    s.rate_ingest.append(spans / cpu_i)
                    us_p = (cpu_p - cpu_i) / convs * 1e6
                    us_m = (cpu_m - cpu_i) / convs * 1e6
                    f = failing / convs
                    s.us_pass.append(us_p)
                    s.us_mix.append(us_m)
                    s.us_failing.append((us_m - (1 - f) * us_p) / f)
                    s.refused.append(ref_p + ref_m + ref_i)
                    s.wall_mix.append(w)
                    if new_database is not None and mode == "batch":
                        cpu_pg, _, _ = run(
                            mix,
                            mode,
                            complete=convs,
                            tmp=where / "pg",
                            results_url=new_database(f"bench_e2e_{r}_{shape}"),
                            **kw,
                        )
                        s.pg_ratio.append(cpu_m / cpu_pg)
    b = statistics.median(base)
    print(
        f"{args.requests} requests of ~512 spans per run; median of {args.repeats} "
        "[min .. max]; server CPU (utime + stime) from the first request until /metrics "
        "shows every conversation"
    )
    print(
        f"{'baseline: protobuf parse + read attributes':<50}: {b:>9,.0f} spans/CPU-s "
        "(this process, 16-span payloads)"
    )
    for mode in modes:
        for shape in shapes:
            s = series[(mode, shape)]
            _, _, _, convs, spans, _, failing = work[shape]
            print(
                f"-- {mode}, {shape}-span shape: {convs} conversations, {spans} spans per run; "
                f"mix: {failing} failing ({failing / convs:.0%})"
            )
            ing = statistics.median(s.rate_ingest)
            for name, xs in (("pass (0 % failing)", s.rate_pass), ("mix", s.rate_mix)):
                med = statistics.median(xs)
                print(
                    f"{'  e2e ' + name:<50}: {_med(xs)} spans/CPU-s  ({med / b:.3f}x "
                    f"baseline, {med / ing:.2f}x ingest-only)"
                )
            print(
                f"{'  ingest only (references match nothing)':<50}: {_med(s.rate_ingest)} "
                f"spans/CPU-s  ({ing / b:.3f}x baseline)"
            )
            print(f"{'  us per passing conversation beyond ingest':<50}: {_med(s.us_pass)}")
            print(f"{'  us per conversation of the mix beyond ingest':<50}: {_med(s.us_mix)}")
            print(f"{'  us per failing conversation beyond ingest':<50}: {_med(s.us_failing)}")
            print(
                f"{'  503/429 answers (3 runs); wall of the mix run':<50}: "
                f"{statistics.median(s.refused):>9}  [{min(s.refused)} .. {max(s.refused)}]"
                f"; {statistics.median(s.wall_mix):.1f} s"
            )
            if s.pg_ratio:
                print(
                    f"{'  mix with PostgreSQL results (until stored)':<50}: "
                    f"{statistics.median(s.pg_ratio):>9.3f}x the SQLite-results rate, same "
                    f"repetition [{min(s.pg_ratio):.3f} .. {max(s.pg_ratio):.3f}]"
                )
    print(
        "targets (batch): <= 150 us per completed conversation beyond ingest, passing and "
        "failing, both shapes; end to end >= 0.5x ingest-only; no 503/429 below capacity"
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
