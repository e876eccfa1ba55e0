"""Storing evaluated conversations in the state file (`StateStore.results.put_results`, `batch`).

The end-to-end workload's conversations (`_e2e.py`: 3 turns x 4 tool calls, every 5th
failing), assembled offline and scored by the real evaluator against the generated
reference set, are stored 32 per writer operation (`put_results`: one e2e request's
conversations, completed in one loop iteration) as `serve` stores them: the encoded
result, its index columns and its window-journal entry, then the writer thread's
inserts and COMMIT. CPU = this thread's CPU time (event-loop side: encoding, index
values, journal entry, submit, wake-up) + `StateStore.writer_cpu_s` (writer thread).

Same-run baseline: one `model_dump_json()` of each result (what the window journal
alone used to cost), so the figure reads "storing a result costs N dumps of it".

Also printed: the encoding alone (the row text as the store writes it, with the
reference-tools row lookup of format 4 when the code has it; CPU, least of the
repeats), and the bytes a stored row takes in the state file (its `view` text, plus
the `reference_tools` rows shared by all rows, per row; works on any schema version,
so the same script measures the code before format 4).

Failure-mode indexing (docs/failure-modes.md; target <= 20 us per stored failing
conversation) is measured two ways, per failing conversation:
- its own work, each part timed as a loop over the same results (CPU time, min of the
  repeats): deriving the signatures from the trajectory rows the failure analysis
  already paired for the list's reasons (`result_signatures`: the analysis itself is
  the list's and the failure log's, computed once per result), reading each result's
  prior row (only failure modes need it, so every stored result's lookup counts: one
  query per batch of 32), writing the rows in the writer's transaction and counting them after the
  commit (every result's `applied`), summed over all results / failing conversations;
- the difference between the same stores with and without it (its signatures and rows
  switched off in this process): the difference of two ~250 us figures, noisy.

    .venv/bin/python bench/bench_result_store.py [--requests N] [--repeats R]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import math
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from _e2e import reference_set_yaml, requests
from tracepass.collector.app.cli.serve import GC_GEN0_THRESHOLD
from tracepass.collector.export.windows.judge_series import journal_entry
from tracepass.collector.pipeline.offline import assemble_offline
from tracepass.collector.state import ResultWrite, StateStore, StoredResult
from tracepass.collector.state import sqlite_results as store_module
from tracepass.collector.state.codec import encode_result
from tracepass.collector.state.failure_index import PRIOR, stored_signatures
from tracepass.evaluator.references.loader import load_reference_sets
from tracepass.evaluator.scoring import explain
from tracepass.evaluator.scoring.evaluator import Evaluator
from tracepass.evaluator.scoring.failure_signatures import is_failing, result_signatures

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


def _best(fn: Any, repeats: int) -> float:
    """The least CPU time of `repeats` runs of `fn()` (this thread)."""
    best = math.inf
    for _ in range(repeats):
        c0 = time.thread_time()
        fn()
        best = min(best, time.thread_time() - c0)
    return best


def failure_mode_parts(
    stored: list[StoredResult], path: Path, repeats: int, one_by_one: dict[str, float]
) -> dict[str, float]:
    """CPU seconds of each part of failure-mode indexing over all of `stored` (see the
    module docstring), each the minimum of `repeats` loops; `one_by_one` receives the
    same parts done a result at a time, as before batches."""
    complete = {id(s): s.conversation.complete for s in stored}
    analysed = [
        (s, [(t, explain._turn_rows(t)) for t in s.result.turns if t.correct is not True])
        for s in stored
        if s.result is not None and is_failing(s.result)
    ]
    signatures = {id(s): tuple(stored_signatures(s)) for s in stored}
    parts = {
        "signatures": _best(
            lambda: [
                result_signatures(s.result, rows, complete=complete[id(s)]) for s, rows in analysed
            ],
            repeats,
        )
    }
    store = StateStore(path, durability="batch")
    store.open()
    try:
        index = store.failure_modes
        changes: list[Any] = []
        now = time.time()

        def rows(round_: int) -> Any:
            # As `put_results` does it: per batch of BATCH results, one query for
            # their prior rows, then their rows collected and inserted at once.
            keys = [f"{round_}-{s.conversation.id}" for s in stored]
            chunks = range(0, len(stored), BATCH)

            def op(conn: Any) -> tuple[float, float]:
                c0 = time.thread_time()
                priors = [index.priors(conn, keys[i : i + BATCH]) for i in chunks]
                c1 = time.thread_time()
                changes.clear()
                for i, found in zip(chunks, priors, strict=True):
                    inserts: list[Any] = []
                    for key, s in zip(keys[i : i + BATCH], stored[i : i + BATCH], strict=True):
                        prior = found.get(key)
                        if not signatures[id(s)] and prior is None:
                            changes.append(((), ()))  # as `put_results`: nothing to replace
                            continue
                        changes.append(
                            index.replace_rows(conn, key, s, signatures[id(s)], now, prior, inserts)
                        )
                    index.insert(conn, inserts)
                return c1 - c0, time.thread_time() - c1

            return store.submit(op).result()

        def rows_one_by_one(round_: int) -> Any:
            # What storing one result at a time did (before batches): a prior lookup
            # and a `write` (its own insert) per result.
            keys = [f"one-{round_}-{s.conversation.id}" for s in stored]

            def op(conn: Any) -> tuple[float, float]:
                c0 = time.thread_time()
                priors = [conn.execute(PRIOR, (key,)).fetchone() for key in keys]
                c1 = time.thread_time()
                for key, s, prior in zip(keys, stored, priors, strict=True):
                    index.write(conn, key, s, signatures[id(s)], now, prior)
                return c1 - c0, time.thread_time() - c1

            return store.submit(op).result()

        prior, write = zip(*(rows(r) for r in range(repeats)), strict=True)
        parts["prior"], parts["write"] = min(prior), min(write)
        prior1, write1 = zip(*(rows_one_by_one(r) for r in range(repeats)), strict=True)
        one_by_one["prior"], one_by_one["write"] = min(prior1), min(write1)

        def count() -> None:
            for i in range(0, len(stored), BATCH):
                index.applied_many(
                    (change, s.conversation.agent_name, s.conversation.agent_version, now)
                    for s, change in zip(stored[i : i + BATCH], changes[i : i + BATCH], strict=True)
                )

        def count_one_by_one() -> None:
            for s, change in zip(stored, changes, strict=True):
                index.applied(change, s.conversation.agent_name, s.conversation.agent_version, now)

        parts["count"] = _best(count, repeats)
        one_by_one["count"] = _best(count_one_by_one, repeats)
    finally:
        store.close()
    return parts


async def store_all(
    stored: list[StoredResult], path: Path, failure_modes: bool = True
) -> tuple[float, float]:
    """(loop-thread CPU, writer-thread CPU) seconds to store `stored`; without
    `failure_modes`, no signatures are derived and no failure-mode rows written."""
    store = StateStore(path, durability="batch")
    store.open()
    signatures = store_module.stored_signatures
    derive = explain.result_signatures
    if not failure_modes:
        store_module.stored_signatures = lambda _: ()  # type: ignore[assignment]
        explain.result_signatures = lambda *_, **__: []  # type: ignore[assignment]
    try:
        loop_cpu = 0.0
        for i in range(0, len(stored), BATCH):
            chunk = stored[i : i + BATCH]
            c0 = time.thread_time()
            now = time.time()
            await store.results.put_results(
                [
                    ResultWrite(
                        s.conversation.id,
                        0,
                        now,
                        16,
                        s,
                        now,
                        None if s.result is None else journal_entry(s.result),
                    )
                    for s in chunk
                ]
            )
            loop_cpu += time.thread_time() - c0
        return loop_cpu, store.writer_cpu_s
    finally:
        store_module.stored_signatures = signatures
        explain.result_signatures = derive
        store.close()


def encode_cpu(stored: list[StoredResult], repeats: int) -> float:
    """CPU seconds to encode every result as the store does (least of `repeats`)."""
    try:  # format 4 (reference tools stored once); absent in the code before it
        from tracepass.collector.state.reference_tools import ReferenceTools
    except ImportError:
        return _best(lambda: [encode_result(s) for s in stored], repeats)
    tools = ReferenceTools()

    def encode(s: StoredResult) -> str:
        row = None if s.result is None else tools.of(s.result)
        return encode_result(s, None if row is None else row.digest)  # type: ignore[call-arg]

    return _best(lambda: [encode(s) for s in stored], repeats)


def stored_bytes(path: Path) -> tuple[float, float]:
    """(row text bytes, shared reference-tools bytes) per stored result in `path`."""
    with sqlite3.connect(path) as conn:
        n, view = conn.execute("SELECT count(*), sum(length(view)) FROM results").fetchone()
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        shared = 0
        if "reference_tools" in tables:
            shared = conn.execute(
                "SELECT coalesce(sum(length(tools) + length(digest)), 0) FROM reference_tools"
            ).fetchone()[0]
    return view / n, shared / n


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
            rows.append((loop_s / n * 1e6, writer_s / n * 1e6, baseline(stored) / n * 1e6))
            without.append((loop_off + writer_off) / n * 1e6)
        row_bytes, shared_bytes = stored_bytes(tmp / "state-0.sqlite")
        encode_us = encode_cpu(stored, max(args.repeats, 5)) / n * 1e6
    loop_us = statistics.median(r[0] for r in rows)
    writer_us = statistics.median(r[1] for r in rows)
    base_us = statistics.median(r[2] for r in rows)
    total = loop_us + writer_us
    print(f"{n} e2e conversations, {BATCH} per commit, median of {args.repeats}")
    print(f"baseline: result.model_dump_json()      : {base_us:7.1f} us per result")
    print(
        f"put_results, batch: loop {loop_us:.1f} + writer {writer_us:.1f} = {total:7.1f} us "
        f"per result ({total / base_us:.1f}x the baseline)"
    )
    print(
        f"encoding alone (row text as stored, least of {max(args.repeats, 5)}): "
        f"{encode_us:7.1f} us per result ({encode_us / base_us:.2f}x the baseline)"
    )
    print(
        f"stored bytes per result: row {row_bytes:.0f} + shared reference tools "
        f"{shared_bytes:.0f} = {row_bytes + shared_bytes:.0f}"
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
    one: dict[str, float] = {}
    parts = failure_mode_parts(stored, tmp / "state-parts.sqlite", max(args.repeats, 5), one)
    per_failing = {k: v / max(failing, 1) * 1e6 for k, v in parts.items()}
    one = {"signatures": parts["signatures"], **one}
    one_us = {k: v / max(failing, 1) * 1e6 for k, v in one.items()}
    spent = sum(per_failing.values())
    split = ", ".join(f"{k} {v:.1f}" for k, v in per_failing.items())
    verdict = "met" if spent <= FAILURE_MODE_TARGET_US else "NOT met"
    print(
        f"failure-mode indexing, its own work (CPU, each part's least of "
        f"{max(args.repeats, 5)} loops over all {n} results): {spent:.1f} us per failing "
        f"conversation ({split}) (target <= {FAILURE_MODE_TARGET_US:.0f} us {verdict})"
    )
    split_one = ", ".join(f"{k} {v:.1f}" for k, v in one_us.items())
    print(
        f"  the same parts one result at a time (a prior lookup, a write and a count per "
        f"result, as before batches): {sum(one_us.values()):.1f} us ({split_one})"
    )


if __name__ == "__main__":
    main()
