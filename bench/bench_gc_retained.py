"""Full garbage-collection pause with many evaluated conversations retained for late spans.

In process: the end-to-end workload's 16-span conversations are normalized once, fed
to a real `Assembler` (defaults but `max_buffered_spans` above the run's spans) and
completed, so all of them are *retained* (kept for late spans for `retention_s`), as in
`serve` after an hour of steady traffic. Then `gc.collect()` (a full collection) runs
`--collections` times; the pause of each is measured with `gc.callbacks` (start -> stop
of generation 2), after `serve`'s own GC setup (`tune_gc`, `gc.freeze()` of everything
alive before the records: modules, references).

Same run, same records: the baseline is the same assembler with packing switched off
(records kept as objects, the code before compact retention). The records are copies
per assembler (each conversation's records are rebuilt from the normalized ones), so
neither run shares objects with the other.

    .venv/bin/python bench/bench_gc_retained.py [--spans 1000000] [--collections 5]
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import statistics
import time
from collections.abc import Iterator

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from _e2e import SPANS_PER_CONVERSATION, requests
from tracepass.collector.app.cli.serve import tune_gc
from tracepass.collector.assembly import Assembler
from tracepass.collector.config import AssemblyConfig
from tracepass.collector.instruments import CollectorInstruments
from tracepass.collector.normalize import SpanRecord, normalize_request


def template() -> list[SpanRecord]:
    (payload,) = requests(1)
    records, _ = normalize_request(ExportTraceServiceRequest.FromString(payload))
    return records


def conversations(records: list[SpanRecord], n: int) -> Iterator[list[SpanRecord]]:
    """`n` fresh conversations (new objects, ids and strings) shaped like the template's."""
    by_conv: dict[str, list[SpanRecord]] = {}
    for rec in records:
        assert rec.conversation_id is not None
        by_conv.setdefault(rec.conversation_id, []).append(rec)
    shapes = list(by_conv.values())
    for i in range(n):
        cid = f"g-{i}"
        yield [
            dataclasses.replace(
                r,
                conversation_id=cid,
                trace_id=f"{i:016x}{r.trace_id[16:]}",
                span_id=f"{r.span_id[:8]}{i:08x}",
            )
            for r in shapes[i % len(shapes)]
        ]


def pauses(
    spans: int, collections: int, packed: bool, records: list[SpanRecord]
) -> list[tuple[float, float]]:
    cfg = AssemblyConfig(max_buffered_spans=spans * 2, max_open_conversations=1_000_000)
    asm = Assembler(cfg, CollectorInstruments.create())
    if not packed:
        asm._pack = lambda conv: None  # type: ignore[method-assign]  # the baseline
    for conv in conversations(records, spans // SPANS_PER_CONVERSATION):
        asm.add(conv)
        asm.poll()
    assert asm.retained_spans >= spans - SPANS_PER_CONVERSATION, asm.retained_spans
    out: list[tuple[float, float]] = []  # (wall, thread CPU) seconds
    started = [0.0, 0.0]

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            started[:] = time.perf_counter(), time.thread_time()
        else:
            out.append((time.perf_counter() - started[0], time.thread_time() - started[1]))

    gc.callbacks.append(on_gc)
    try:
        for _ in range(collections):
            gc.collect()
    finally:
        gc.callbacks.remove(on_gc)
    del asm
    gc.collect()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=1_000_000)
    parser.add_argument("--collections", type=int, default=5)
    args = parser.parse_args()
    records = template()
    tune_gc()
    gc.collect()
    gc.freeze()
    results = {}
    for packed in (False, True):
        results[packed] = pauses(args.spans, args.collections, packed, records)
    print(
        f"{args.spans:,} retained spans ({args.spans // SPANS_PER_CONVERSATION:,} evaluated "
        f"16-span conversations); {args.collections} full collections each; pause = wall "
        "(CPU of the collecting thread, steadier on a shared machine)"
    )
    base = statistics.median(c for _, c in results[False])
    for packed, label in ((False, "baseline: records kept as objects"), (True, "packed")):
        walls = [w for w, _ in results[packed]]
        cpus = [c for _, c in results[packed]]
        med = statistics.median(cpus)
        print(
            f"{label:<36}: median {statistics.median(walls) * 1e3:>7.1f} ms "
            f"({med * 1e3:.1f} ms CPU), max {max(walls) * 1e3:>7.1f} ms "
            f"({max(cpus) * 1e3:.1f} ms CPU); CPU {med / base:.3f}x baseline"
        )
    print("target: full-GC pause p99 <= 50 ms with 1M retained buffered spans")


if __name__ == "__main__":
    main()
