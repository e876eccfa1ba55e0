"""CPU per conversation of `build_conversation` (the rebuild `serve` does once per
completed conversation) on the end-to-end workload, next to a baseline measured in the
same run.

Why in process: `bench_e2e.py` measures the whole server, where the rebuild is one
share among many (and its figure moves with GC and the other stages); this isolates it,
on the very conversations the end-to-end run evaluates (`_e2e.py`: 3 turns x (agent
span + 4 tool spans) + the end marker). Records are normalized once outside the timed
loop and grouped per conversation in arrival order, as the assembler hands them over.
The baseline is the least any rebuild does with the same records: index them by
(trace id, span id) and sort them by start time. GC as in `serve` (`tune_gc`); CPU time
of this process; repetitions alternate, medians reported.

    .venv/bin/python bench/bench_rebuild.py [--requests N] [--repeats R]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from operator import attrgetter

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from _e2e import CONVERSATIONS_PER_REQUEST, requests
from tracepass.collector.app.cli.serve import tune_gc
from tracepass.collector.assembly import build_conversation
from tracepass.collector.normalize import SpanRecord, normalize_request

Groups = Sequence[tuple[str, tuple[SpanRecord, ...]]]
_BY_START = attrgetter("start_ns", "span_id")


def conversations(n_requests: int) -> Groups:
    by_conv: dict[str, list[SpanRecord]] = {}
    for payload in requests(n_requests):
        records, _ = normalize_request(ExportTraceServiceRequest.FromString(payload))
        for rec in records:
            assert rec.conversation_id is not None
            by_conv.setdefault(rec.conversation_id, []).append(rec)
    return [(key, tuple(recs)) for key, recs in by_conv.items()]


def baseline(groups: Groups) -> int:
    n = 0
    for _, records in groups:
        index = {(r.trace_id, r.span_id): r for r in records}
        n += len(sorted(index.values(), key=_BY_START))
    return n


def rebuild(groups: Groups) -> int:
    n = 0
    for key, records in groups:
        n += len(build_conversation(key, records).turns)
    return n


def _cpu(fn: Callable[[Groups], int], groups: Groups) -> float:
    t0 = time.process_time()
    fn(groups)
    return time.process_time() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=7)
    args, _ = parser.parse_known_args()  # run_all.py passes every script the same flags
    tune_gc()
    groups = conversations(args.requests)
    assert len(groups) == args.requests * CONVERSATIONS_PER_REQUEST
    assert rebuild(groups) == 3 * len(groups)  # every conversation rebuilt with 3 turns
    base: list[float] = []
    full: list[float] = []
    for _ in range(args.repeats):
        base.append(_cpu(baseline, groups) / len(groups) * 1e6)
        full.append(_cpu(rebuild, groups) / len(groups) * 1e6)
    b, f = statistics.median(base), statistics.median(full)
    print(
        f"conversations per run              : {len(groups):,} (16 spans each), "
        f"median of {args.repeats} [min .. max]"
    )
    print(f"baseline: index + sort the records : {b:7.1f} us/conversation")
    print(
        f"build_conversation                 : {f:7.1f} us/conversation  ({f / b:.1f}x baseline)"
        f"  [{min(full):.1f} .. {max(full):.1f}]"
    )


if __name__ == "__main__":
    main()
