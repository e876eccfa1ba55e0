"""Storing one evaluated conversation in the state file (`StateStore.put_result`, `batch`).

The end-to-end workload's conversations (`_e2e.py`: 3 turns x 4 tool calls, every 5th
failing), assembled offline and scored by the real evaluator against the generated
reference set, are stored 32 per group commit as `serve` stores them: the encoded
result, its index columns and its window-journal entry, then the writer thread's
inserts and COMMIT. CPU = this thread's CPU time (event-loop side: encoding, index
values, journal entry, submit, wake-up) + `StateStore.writer_cpu_s` (writer thread).

Same-run baseline: one `model_dump_json()` of each result (what the window journal
alone used to cost), so the figure reads "storing a result costs N dumps of it".

Failure-mode indexing (docs/failure-modes.md) is measured as the difference between
the same stores with and without it (its signatures and rows switched off in this
process), divided by the number of failing conversations: the target is <= 20 us per
stored failing conversation.

    .venv/bin/python bench/bench_result_store.py [--requests N] [--repeats R]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from _e2e import reference_set_yaml, requests
from tracepass.collector.app.cli.serve import GC_GEN0_THRESHOLD
from tracepass.collector.export.judge_series import journal_entry
from tracepass.collector.pipeline.offline import assemble_offline
from tracepass.collector.state import StateStore, StoredResult
from tracepass.collector.state import store as store_module
from tracepass.evaluator.references.loader import load_reference_sets
from tracepass.evaluator.scoring.evaluator import Evaluator
from tracepass.evaluator.scoring.failure_signatures import is_failing

BATCH = 32  # conversations per group commit (one e2e request's worth)
FAILURE_MODE_TARGET_US = 20.0


def workload(n_requests: int, tmp: Path) -> list[StoredResult]:
    refs_path = tmp / "references.yaml"
    refs_path.write_text(reference_set_yaml(), encoding="utf-8")
    (reference_set,) = load_reference_sets([refs_path])
    by_id = {r.id: r for r in reference_set.references}
    payloads = [ExportTraceServiceRequest.FromString(p) for p in requests(n_requests)]
    evaluator = Evaluator()
    out: list[StoredResult] = []
    for conversation in assemble_offline(payloads):
        task = int(conversation.id.split("-")[1]) % len(by_id)
        result = evaluator.evaluate(
            conversation, by_id[f"task-{task}"], reference_set=reference_set.name
        )
        out.append(StoredResult(conversation, result, 0))
    return out


# CPU seconds spent inside the failure-mode code of the last `store_all` with it on:
# deriving signatures (loop), writing rows (writer thread), counting them (loop).
SPENT = {"signatures": 0.0, "write": 0.0, "count": 0.0}
CALLS = {"signatures": 0, "write": 0, "count": 0}


def _timed(name: str, fn: Any) -> Any:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        CALLS[name] += 1
        c0 = time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            SPENT[name] += time.thread_time() - c0

    return wrapper


def timer_overhead(n: int = 20000) -> float:
    """CPU seconds the timing wrapper itself adds to one call (measured on a no-op in
    the same run), subtracted from SPENT per call."""
    noop = _timed("calibration", lambda: None)
    SPENT["calibration"], CALLS["calibration"] = 0.0, 0
    c0 = time.thread_time()
    for _ in range(n):
        noop()
    wrapped = time.thread_time() - c0
    c0 = time.thread_time()
    for _ in range(n):
        (lambda: None)()
    plain = time.thread_time() - c0
    del SPENT["calibration"], CALLS["calibration"]
    return max(wrapped - plain, 0.0) / n


async def store_all(
    stored: list[StoredResult], path: Path, failure_modes: bool = True
) -> tuple[float, float]:
    """(loop-thread CPU, writer-thread CPU) seconds to store `stored`; without
    `failure_modes`, no signatures are derived and no failure-mode rows written."""
    store = StateStore(path, durability="batch")
    store.open()
    signatures = store_module.stored_signatures
    if not failure_modes:
        store_module.stored_signatures = lambda _: ()  # type: ignore[assignment]
    else:
        for k in SPENT:
            SPENT[k] = 0.0
            CALLS[k] = 0
        store_module.stored_signatures = _timed("signatures", signatures)
        index = store.failure_modes
        index.write = _timed("write", index.write)  # type: ignore[method-assign]
        index.applied = _timed("count", index.applied)  # type: ignore[method-assign]
    try:
        loop_cpu = 0.0
        for i in range(0, len(stored), BATCH):
            chunk = stored[i : i + BATCH]
            c0 = time.thread_time()
            now = time.time()
            await asyncio.gather(
                *(
                    store.put_result(
                        s.conversation.id,
                        revision=0,
                        closed_at=now,
                        n_spans=16,
                        stored=s,
                        evaluated_at=now,
                        journal=None if s.result is None else journal_entry(s.result),
                    )
                    for s in chunk
                )
            )
            loop_cpu += time.thread_time() - c0
        return loop_cpu, store.writer_cpu_s
    finally:
        store_module.stored_signatures = signatures
        store.close()


def baseline(stored: list[StoredResult]) -> float:
    c0 = time.process_time()
    for s in stored:
        assert s.result is not None
        s.result.model_dump_json()
    return time.process_time() - c0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    gc.set_threshold(GC_GEN0_THRESHOLD, 20, 100)
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        stored = workload(args.requests, tmp)
        n = len(stored)
        failing = sum(1 for s in stored if s.result is not None and is_failing(s.result))
        rows: list[tuple[float, float, float]] = []
        without: list[float] = []
        inside: list[float] = []
        parts: list[dict[str, float]] = []
        for r in range(args.repeats):
            # The analysis is cached per result object: fresh copies for every run.
            copies = [StoredResult(s.conversation, s.result, 0) for s in stored]
            off = [
                StoredResult(s.conversation, s.result.model_copy() if s.result else None, 0)
                for s in stored
            ]
            loop_off, writer_off = asyncio.run(
                store_all(off, tmp / f"state-off-{r}.sqlite", failure_modes=False)
            )
            loop_s, writer_s = asyncio.run(store_all(copies, tmp / f"state-{r}.sqlite"))
            # The part the timer added: the one inside `SPENT` (half of a no-op wrapped call).
            over = timer_overhead() / 2
            spent = {k: max(v - CALLS[k] * over, 0.0) for k, v in SPENT.items()}
            inside.append(sum(spent.values()) / max(failing, 1) * 1e6)
            parts.append({k: v / max(failing, 1) * 1e6 for k, v in spent.items()})
            rows.append((loop_s / n * 1e6, writer_s / n * 1e6, baseline(stored) / n * 1e6))
            without.append((loop_off + writer_off) / n * 1e6)
    loop_us = statistics.median(r[0] for r in rows)
    writer_us = statistics.median(r[1] for r in rows)
    base_us = statistics.median(r[2] for r in rows)
    total = loop_us + writer_us
    print(f"{n} e2e conversations, {BATCH} per commit, median of {args.repeats}")
    print(f"baseline: result.model_dump_json()      : {base_us:7.1f} us per result")
    print(
        f"put_result, batch: loop {loop_us:.1f} + writer {writer_us:.1f} = {total:7.1f} us "
        f"per result ({total / base_us:.1f}x the baseline)"
    )
    # The difference of two ~200 us figures is a few us per result: the minimum of the
    # repeats (least disturbed by other load) of each, not the medians.
    off_us = min(without)
    on_us = min(r[0] + r[1] for r in rows)
    added = (on_us - off_us) * n / max(failing, 1)
    print(
        f"without failure-mode indexing: {off_us:7.1f} us per result; difference: "
        f"{added:.1f} us per failing conversation ({failing} of {n} failing)"
    )
    spent = statistics.median(inside)
    split = ", ".join(f"{k} {statistics.median(p[k] for p in parts):.1f}" for k in SPENT)
    verdict = "met" if spent <= FAILURE_MODE_TARGET_US else "NOT met"
    print(
        f"failure-mode indexing, CPU inside its code (signatures + row writes + counters, "
        f"all results' share): {spent:.1f} us per failing conversation ({split}) "
        f"(target <= {FAILURE_MODE_TARGET_US:.0f} us {verdict})"
    )


if __name__ == "__main__":
    main()
