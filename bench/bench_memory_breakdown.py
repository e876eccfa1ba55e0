"""Where the memory of a buffered span goes, and what buffering and rebuilding cost.

In process, on `bench_memory.py`'s workload (open conversations of 2 turns x
(invoke_agent + 4 execute_tool), nothing completes): the requests are normalized and
added to an `Assembler` under tracemalloc, and the bytes still allocated afterwards are
listed per span by the line that allocated them (what `bench_memory.py`'s RSS figure is
made of, minus allocator slack and SQLite). `--cpu` instead measures normalize +
assemble per span and `build_conversation` per conversation (CPU time, median of 7).
Both print figures of the code imported, so a before/after comparison runs the script
twice, the "before" with PYTHONPATH pointing at the older sources.

    .venv/bin/python bench/bench_memory_breakdown.py [--conversations N] [--cpu]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
import tracemalloc

from opentelemetry.metrics import NoOpMeter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from _baseline import decode_and_read_attributes
from _e2e import request
from tracepass.collector.assembly import Assembler
from tracepass.collector.assembly.build import build_conversation
from tracepass.collector.config import AssemblyConfig
from tracepass.collector.instruments import CollectorInstruments
from tracepass.collector.normalize import normalize_request
from tracepass.collector.normalize.stats import ReadTally

SPANS_PER_CONVERSATION = 10
CONVERSATIONS_PER_REQUEST = 51


def ingest(requests: list[ExportTraceServiceRequest]) -> Assembler:
    """Normalize (counting reads, as `serve` does) and buffer every request."""
    big = 10_000_000
    asm = Assembler(
        AssemblyConfig(idle_timeout_s=3600, max_buffered_spans=big, max_open_conversations=big),
        CollectorInstruments.create(NoOpMeter("bench")),
    )
    tally = ReadTally()
    for req in requests:
        asm.add(normalize_request(req, tally=tally)[0])
    return asm


def cpu(requests: list[ExportTraceServiceRequest], spans: int) -> None:
    gc.freeze()
    gc.disable()
    ingest_us, build_us = [], []
    for _ in range(7):
        t0 = time.process_time()
        asm = ingest(requests)
        ingest_us.append((time.process_time() - t0) / spans * 1e6)
        keys = asm.open_keys()
        held = [asm.snapshot(k) for k in keys]
        t0 = time.process_time()
        for key, snap in zip(keys, held, strict=True):
            assert snap is not None
            build_conversation(key, snap[0])
        build_us.append((time.process_time() - t0) / len(keys) * 1e6)
        del asm, held
        gc.collect()
    i, b = statistics.median(ingest_us), statistics.median(build_us)
    payloads = [r.SerializeToString() for r in requests]
    base_us = []
    for _ in range(7):
        t0 = time.process_time()
        decode_and_read_attributes(payloads)
        base_us.append((time.process_time() - t0) / spans * 1e6)
    base = statistics.median(base_us)
    print(f"baseline: decode + read every attribute (same run): {base:6.2f} us/span")
    print(
        f"normalize + assemble : {i:6.2f} us/span  [{min(ingest_us):.2f} .. {max(ingest_us):.2f}]"
        f"  ({i / base:.1f}x the baseline)"
    )
    print(
        f"build_conversation   : {b:6.1f} us/conversation  [{min(build_us):.1f} .. {max(build_us):.1f}]"
    )
    print(f"per conversation     : {i * SPANS_PER_CONVERSATION + b:6.1f} us (ingest + rebuild)")


def memory(requests: list[ExportTraceServiceRequest], spans: int, top: int) -> None:
    gc.collect()
    tracemalloc.start(1)
    before = tracemalloc.take_snapshot()
    asm = ingest(requests)
    gc.collect()
    stats = tracemalloc.take_snapshot().compare_to(before, "lineno")
    wire = sum(r.ByteSize() for r in requests) / spans  # same-run baseline
    per_span = sum(s.size_diff for s in stats) / spans
    print(
        f"tracemalloc, still allocated: {per_span:,.0f} B/span "
        f"({per_span / wire:.2f}x the protobuf wire size, {wire:,.0f} B/span)"
    )
    for s in stats[:top]:
        frame = s.traceback[0]
        where = f"{frame.filename.split('/src/')[-1]}:{frame.lineno}"
        print(
            f"  {s.size_diff / spans:7.1f} B/span {s.count_diff / spans:5.2f} blocks/span  {where}"
        )
    assert asm.held_spans == spans


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=4_080)
    parser.add_argument("--cpu", action="store_true", help="CPU time instead of memory")
    parser.add_argument("--top", type=int, default=16, help="allocation sites listed")
    args = parser.parse_args()
    requests = [
        ExportTraceServiceRequest.FromString(
            request(
                first,
                min(CONVERSATIONS_PER_REQUEST, args.conversations - first),
                prefix="m",
                matching=False,
                end_marker=False,
                turns=2,
            )
        )
        for first in range(0, args.conversations, CONVERSATIONS_PER_REQUEST)
    ]
    spans = args.conversations * SPANS_PER_CONVERSATION
    print(f"{args.conversations:,} open conversations x {SPANS_PER_CONVERSATION} spans, in process")
    if args.cpu:
        cpu(requests, spans)
    else:
        memory(requests, spans, args.top)


if __name__ == "__main__":
    main()
