"""Young-generation GC on the evaluation path, with and without `serve`'s batch pause
(`pipeline/gc_pause.py`, issue 36 lever 1), in process, same run.

What one batch does here is what `serve` does for the conversations one loop iteration
completed (≈ 57 under the e2e load): rebuild each conversation from its span records
(`build_conversation`), score it against its reference, analyse a failure
(`explain.failure_analysis`) and encode the stored row (`encode_result`); the batch's
results stay alive until the batch ends, then the newest 256 stay (the results cache).
GC as in `serve` (`tune_gc`, start-up objects frozen). Reported per conversation:
collections of each generation, GC time (`gc.callbacks`, wall time inside the
collector) and CPU of the whole loop; repetitions alternate off/on, medians reported.
Counts are exact; the times move with machine load.

    .venv/bin/python bench/bench_gc_batches.py [--requests N] [--repeats R] [--batch B]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import tempfile
import time
from collections import deque
from pathlib import Path
from typing import Any

from _e2e import reference_set_yaml
from bench_rebuild import conversations
from tracepass.collector.app.cli.serve import tune_gc
from tracepass.collector.assembly import build_conversation
from tracepass.collector.pipeline.gc_pause import BatchGcPause
from tracepass.collector.state import StoredResult
from tracepass.collector.state.codec import encode_result
from tracepass.evaluator.references.loader import load_reference_sets
from tracepass.evaluator.scoring import explain
from tracepass.evaluator.scoring.evaluator import Evaluator

SHAPE = 9


class GcClock:
    """Collections per generation and seconds spent inside them."""

    def __init__(self) -> None:
        self.counts = [0, 0, 0]
        self.seconds = 0.0
        self._t = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._t = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._t
            self.counts[info["generation"]] += 1


def run(
    groups: Any, refs: dict[str, Any], set_name: str, batch: int, paused: bool
) -> dict[str, float]:
    pause = BatchGcPause()
    pause.enable(paused)
    evaluator = Evaluator()
    cache: deque[StoredResult] = deque(maxlen=256)
    clock = GcClock()
    gc.collect()
    gc.callbacks.append(clock)
    t0 = time.process_time()
    try:
        for start in range(0, len(groups), batch):
            held = []
            with pause.held():
                for key, records in groups[start : start + batch]:
                    conversation = build_conversation(key, records)
                    task = int(key.split("-")[1]) % len(refs)
                    result = evaluator.evaluate(
                        conversation, refs[f"task-{task}"], reference_set=set_name
                    )
                    explain.failure_analysis(result, conversation.complete)
                    stored = StoredResult(conversation, result, 0)
                    encode_result(stored)
                    held.append(stored)
                    pause.check()
            cache.extend(held)
    finally:
        cpu = time.process_time() - t0
        gc.callbacks.remove(clock)
    n = len(groups)
    return {
        "gen0": clock.counts[0] / n * 1000,
        "gen1": clock.counts[1] / n * 1000,
        "gen2": clock.counts[2] / n * 1000,
        "gc_us": clock.seconds / n * 1e6,
        "cpu_us": cpu / n * 1e6,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=60)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch", type=int, default=57)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "references.yaml"
        path.write_text(reference_set_yaml(shape=SHAPE), encoding="utf-8")
        (reference_set,) = load_reference_sets([path])
    refs = {r.id: r for r in reference_set.references}
    groups = conversations(args.requests, str(SHAPE))
    tune_gc()
    gc.collect()
    gc.freeze()
    runs: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    for _ in range(args.repeats):
        for paused in (False, True):
            runs[paused].append(run(groups, refs, reference_set.name, args.batch, paused))
    print(
        f"{len(groups)} conversations ({SHAPE}-span mix), batches of {args.batch}, medians of {args.repeats}"
    )
    for paused in (False, True):
        med = {k: statistics.median(r[k] for r in runs[paused]) for k in runs[paused][0]}
        label = "batch pause on " if paused else "batch pause off"
        print(
            f"  {label}: collections per 1,000 conversations gen0 {med['gen0']:.1f} "
            f"gen1 {med['gen1']:.1f} gen2 {med['gen2']:.1f}; GC {med['gc_us']:.1f} us/conv; "
            f"CPU {med['cpu_us']:.0f} us/conv"
        )


if __name__ == "__main__":
    main()
