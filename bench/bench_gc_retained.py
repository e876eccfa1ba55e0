"""Full garbage-collection pause with many evaluated conversations retained for late spans.

In process: the end-to-end workload's 16-span conversations are normalized once, fed
to a real `Assembler` (defaults but `max_buffered_spans` above the run's spans) and
completed, so all of them are *retained* (kept for late spans for `retention_s`), as in
`serve` after an hour of steady traffic. Then `gc.collect()` (a full collection) runs
`--collections` times; the pause of each is measured with `gc.callbacks` (start -> stop
of generation 2), after `serve`'s own GC setup (`tune_gc`, `gc.freeze()` of everything
alive before the records: modules, references).

Same run, same records, three representations:
- baseline: the records kept alive as objects (the completed conversations' records
  held by the bench, as the code before compact retention held them; without that
  code's per-conversation dicts and links, so a lower bound of its pause);
- packed: the assembler as with `durability: none` (one untracked bytes object per
  conversation, `assembly/packed.py`);
- on disk: the assembler as with `batch` durability (`records_on_disk`: no records in
  memory; the span buffer holds them, read back by a late span), the default.
The records are copies per run (each conversation's records are rebuilt from the
normalized ones), so no run shares objects with another.

    .venv/bin/python bench/bench_gc_retained.py [--spans 1000000] [--collections 5]
    .venv/bin/python bench/bench_gc_retained.py --cpu    # assembler CPU per conversation

`--cpu` instead measures what retention costs at completion: the CPU time of the
assembler (add + completion + retention, serve's GC setup) per conversation, packed vs
on disk, the two interleaved over `--repeats` rounds of `--conversations` each (same run;
the records as objects, with nothing to pack or drop, is the baseline).
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


MODES = {
    "objects": "baseline: records kept as objects",
    "packed": "packed (durability: none)",
    "disk": "on disk (batch, the default)",
}


def pauses(
    spans: int, collections: int, mode: str, records: list[SpanRecord]
) -> list[tuple[float, float]]:
    cfg = AssemblyConfig(max_buffered_spans=spans * 2, max_open_conversations=1_000_000)
    asm = Assembler(cfg, CollectorInstruments.create(), records_on_disk=mode != "packed")
    kept: list[tuple[SpanRecord, ...]] = []  # the baseline's records, alive
    for conv in conversations(records, spans // SPANS_PER_CONVERSATION):
        asm.add(conv)
        for done in asm.poll():
            if mode == "objects":
                kept.append(done.records)
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
    del asm, kept
    gc.collect()
    return out


def assembler_cpu(mode: str, convs: list[list[SpanRecord]]) -> float:
    """CPU seconds per conversation to add, complete and retain `convs`."""
    cfg = AssemblyConfig(max_buffered_spans=10**9, max_open_conversations=1_000_000)
    asm = Assembler(cfg, CollectorInstruments.create(), records_on_disk=mode != "packed")
    kept: list[tuple[SpanRecord, ...]] = []
    t0 = time.thread_time()
    for conv in convs:
        asm.add(conv)
        for done in asm.poll():
            if mode == "objects":
                kept.append(done.records)
    return (time.thread_time() - t0) / len(convs)


def cpu_main(conversations_n: int, repeats: int, records: list[SpanRecord]) -> None:
    tune_gc()
    gc.collect()
    gc.freeze()
    per: dict[str, list[float]] = {mode: [] for mode in MODES}
    for _ in range(repeats):
        for mode in MODES:
            convs = list(conversations(records, conversations_n))
            per[mode].append(assembler_cpu(mode, convs))
            del convs
            gc.collect()
    base = statistics.median(per["objects"])
    print(
        f"assembler CPU per {SPANS_PER_CONVERSATION}-span conversation (add + complete + "
        f"retain), median of {repeats} interleaved rounds of {conversations_n:,}"
    )
    for mode, label in MODES.items():
        med = statistics.median(per[mode])
        print(
            f"{label:<36}: {med * 1e6:7.1f} us [{min(per[mode]) * 1e6:.1f} .. "
            f"{max(per[mode]) * 1e6:.1f}]; {med / base:.2f}x baseline"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=1_000_000)
    parser.add_argument("--collections", type=int, default=5)
    parser.add_argument("--cpu", action="store_true", help="assembler CPU per conversation")
    parser.add_argument("--conversations", type=int, default=5_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    records = template()
    if args.cpu:
        cpu_main(args.conversations, args.repeats, records)
        return
    tune_gc()
    gc.collect()
    gc.freeze()
    results = {mode: pauses(args.spans, args.collections, mode, records) for mode in MODES}
    print(
        f"{args.spans:,} retained spans ({args.spans // SPANS_PER_CONVERSATION:,} evaluated "
        f"16-span conversations); {args.collections} full collections each; pause = wall "
        "(CPU of the collecting thread, steadier on a shared machine)"
    )
    base = statistics.median(c for _, c in results["objects"])
    packed = statistics.median(c for _, c in results["packed"])
    for mode, label in MODES.items():
        walls = [w for w, _ in results[mode]]
        cpus = [c for _, c in results[mode]]
        med = statistics.median(cpus)
        print(
            f"{label:<36}: median {statistics.median(walls) * 1e3:>7.1f} ms "
            f"({med * 1e3:.1f} ms CPU), max {max(walls) * 1e3:>7.1f} ms "
            f"({max(cpus) * 1e3:.1f} ms CPU); CPU {med / base:.3f}x baseline, "
            f"{med / packed:.3f}x packed"
        )
    print("target: full-GC pause p99 <= 50 ms with 1M retained buffered spans")


if __name__ == "__main__":
    main()
