"""Scale-out through the gateway: N `tracepass serve` replicas behind the project's
Collector distribution (`make otelcol`, deploy/otelcol/static-two-replicas.yaml with
its ports rewritten to loopback) against one replica fed directly, in the same run.

Both set-ups get the same traffic: conversations of two turns (one trace each, an
`invoke_agent` root and one `execute_tool` child, the conversation id on every span,
real OTel SDK spans), sent over real OTLP gRPC by `--senders` threads of this process
in requests of `--batch` spans. Before the clock starts each set-up evaluates a
warm-up share (imports and caches are warm, the hash ring has routed to every
replica). The measured run lasts from the first request until the replicas' /metrics
count every conversation evaluated (so it includes the gateway's grouping wait,
`groupbytrace.wait_duration` 1 s, and the replicas' `assembly.idle_timeout_s`).

Printed per set-up: conversations per wall second, CPU seconds of the whole process
tree (every replica, and the gateway; /proc utime + stime of each process and its
descendants), conversations per CPU-second; then the ratios (gateway set-up over one
replica) and the gateway's CPU per 1,000 spans. The sender's own CPU is in neither.
Replicas keep results in their state files (no PostgreSQL: it would add a process
and a network write per result to one side only).

    .venv/bin/python bench/bench_gateway.py [--replicas 3] [--conversations 1500]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "deploy"))
from _gateway_support import (  # noqa: E402
    GATEWAY_BIN,
    REFERENCES,
    Gateway,
    Replica,
    make_conversation,
    wait_until,
)
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan  # noqa: E402
from opentelemetry.sdk.trace.export import SpanExportResult  # noqa: E402

IDLE_TIMEOUT_S = 1.0


def tree_cpu_s(pid: int) -> float:
    """User + system CPU seconds of `pid` and every live descendant, plus what their
    reaped children used (cutime + cstime)."""
    parents: dict[int, int] = {}
    cpu: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited meanwhile
        parents[int(entry)] = int(fields[1])
        cpu[int(entry)] = sum(int(fields[i]) for i in (11, 12, 13, 14)) / tick
    total, stack = 0.0, [pid]
    while stack:
        p = stack.pop()
        total += cpu.get(p, 0.0)
        stack.extend(c for c, parent in parents.items() if parent == p)
    return total


def send(endpoint: str, spans: Sequence[ReadableSpan], batch: int, senders: int) -> None:
    """Every span, in requests of `batch`, from `senders` threads (a refused request is
    retried: the run measures delivered traffic)."""
    chunks = [spans[i : i + batch] for i in range(0, len(spans), batch)]
    errors: list[BaseException] = []

    def work(part: list[Sequence[ReadableSpan]]) -> None:
        exporter = OTLPSpanExporter(endpoint=endpoint, insecure=True, timeout=30)
        try:
            for chunk in part:
                deadline = time.monotonic() + 120
                while exporter.export(chunk) != SpanExportResult.SUCCESS:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"{endpoint} refused a request for 120 s")
                    time.sleep(0.2)
        except BaseException as exc:
            errors.append(exc)
        finally:
            exporter.shutdown()

    threads = [threading.Thread(target=work, args=(chunks[i::senders],)) for i in range(senders)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def spans_of(prefix: str, n: int) -> list[ReadableSpan]:
    return [s for i in range(n) for s in make_conversation(f"{prefix}-{i}", "every").spans]


def evaluated(replicas: Sequence[Replica]) -> float:
    return sum(r.evaluated() for r in replicas)


def run(
    tmp: Path, n_replicas: int, gateway: bool, args: argparse.Namespace
) -> tuple[float, float, float, int]:
    """(wall s, replicas' CPU-s, gateway CPU-s, spans) of one measured run."""
    refs = tmp / "refs.yaml"
    refs.write_text(REFERENCES, encoding="utf-8")
    name = f"gw{n_replicas}" if gateway else "direct"
    replicas = [
        Replica(tmp / f"{name}-r{i}", refs, "", idle_timeout_s=IDLE_TIMEOUT_S)
        for i in range(n_replicas)
    ]
    gw = Gateway(tmp / f"{name}-gateway") if gateway else None
    warm = spans_of(f"{name}-warm", args.warmup * n_replicas)
    measured = spans_of(f"{name}-c", args.conversations)
    try:
        for r in replicas:
            r.start()
        if gw is not None:
            gw.start([r.endpoint for r in replicas])
        endpoint = gw.endpoint if gw is not None else replicas[0].endpoint
        send(endpoint, warm, args.batch, args.senders)
        target = args.warmup * n_replicas
        wait_until(lambda: evaluated(replicas) >= target or None, 300, "the warm-up", 0.2)
        time.sleep(1.0)  # let the warm-up's last writes settle before the baseline
        pids = [r.proc.pid for r in replicas if r.proc is not None]
        gw_pid = gw.proc.pid if gw is not None and gw.proc is not None else None
        c0 = sum(tree_cpu_s(p) for p in pids)
        g0 = tree_cpu_s(gw_pid) if gw_pid is not None else 0.0
        w0 = time.perf_counter()
        send(endpoint, measured, args.batch, args.senders)
        goal = target + args.conversations
        wait_until(lambda: evaluated(replicas) >= goal or None, 600, "every conversation", 0.05)
        wall = time.perf_counter() - w0
        cpu = sum(tree_cpu_s(p) for p in pids) - c0
        gcpu = (tree_cpu_s(gw_pid) - g0) if gw_pid is not None else 0.0
        time.sleep(2.0)
        got = evaluated(replicas)
        if got != goal:  # a split conversation would be evaluated as two fragments
            raise RuntimeError(f"{name}: {got} evaluations for {goal} conversations")
        if gw is not None:
            shares = [round(r.evaluated()) for r in replicas]
            print(f"  {name}: evaluations per replica {shares}", flush=True)
        return wall, cpu, gcpu, len(measured)
    finally:
        if gw is not None:
            gw.stop()
        for r in replicas:
            r.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--replicas", type=int, default=3)
    ap.add_argument("--conversations", type=int, default=1500)
    ap.add_argument("--warmup", type=int, default=20, help="warm-up conversations per replica")
    ap.add_argument("--batch", type=int, default=256, help="spans per OTLP request")
    ap.add_argument("--senders", type=int, default=4)
    args = ap.parse_args()
    if not GATEWAY_BIN.exists():
        # Skipped, not failed: `make bench` runs every script, with or without Go.
        print(f"skipped: {GATEWAY_BIN} not built (`make otelcol` builds it)", file=sys.stderr)
        return 0
    with tempfile.TemporaryDirectory(prefix="bench-gateway-") as d:
        tmp = Path(d)
        one = run(tmp, 1, False, args)
        many = run(tmp, args.replicas, True, args)
    rows = []
    for label, (wall, cpu, gcpu, spans) in (
        ("one replica, direct", one),
        (f"gateway + {args.replicas} replicas", many),
    ):
        total_cpu = cpu + gcpu
        rows.append((args.conversations / wall, args.conversations / total_cpu))
        print(
            f"{label:>24}: {args.conversations} conversations ({spans} spans) in {wall:.1f} s "
            f"= {args.conversations / wall:.1f}/s; CPU {total_cpu:.1f} s (replicas {cpu:.1f}, "
            f"gateway {gcpu:.1f}) = {args.conversations / total_cpu:.1f} conversations/CPU-s",
            flush=True,
        )
    wall_ratio = rows[1][0] / rows[0][0]
    cpu_ratio = rows[1][1] / rows[0][1]
    print(f"throughput ratio (gateway set-up / one replica): {wall_ratio:.2f}")
    print(f"conversations per CPU-second ratio (gateway set-up / one replica): {cpu_ratio:.2f}")
    print(f"gateway CPU per 1,000 spans: {1000 * many[2] / many[3] * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
