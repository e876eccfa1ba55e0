"""The rolling windows' memory and CPU per entry, this tree against another source tree.

Each measurement runs in a fresh child process whose `tracepass.evaluator` is imported
from the tree given (`PYTHONPATH=<tree>/evaluator/src`), so the branch point and this
change run the same script in the same run, interleaved round by round:

- bytes per entry: `tracemalloc`'s traced memory after adding `--entries` evaluated
  conversations to a `RollingAggregator` (default windows 1 h / 24 h + the decayed one,
  2 keys, 54 tasks, every 20th add a revision of an earlier conversation), minus before,
  divided by the entries held. The conversation ids exist before tracing starts: their
  strings are shared with the rest of the collector and are not counted here;
- GC-tracked objects per entry (`len(gc.get_objects())` after minus before);
- CPU (`time.process_time`, no tracing) of the adds (µs per add), of one `snapshot`
  of the full windows (median of 9), of `to_state` (the persisted snapshot) and of
  `from_state` (a restart reading it back).

    .venv/bin/python bench/bench_window_memory.py --before /tmp/base68-soak [--entries 200000]

Without `--before` (as `make bench` runs it) only this tree is measured: no ratio.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
KEYS = [("agent", "v1", "refs"), ("agent", "v2", "refs")]
TASKS = [f"task-{i}" for i in range(54)]
TAGS = ['["pass",{"pass":3}]', '["fail",{"pass":2,"fail":1}]']


def _feed(agg: Any, ids: list[str]) -> None:
    """Every 20th add revises the conversation added 10 before it (a late span)."""
    for i, cid in enumerate(ids):
        revise = i % 20 == 19
        conv = ids[i - 10] if revise else cid
        agg.add(
            KEYS[i % 2],
            task=TASKS[i % 54],
            success=i % 5 != 0,
            now=1_000.0 + i * 0.005,
            conversation_id=conv,
            revision=1 if revise else 0,
            tag=TAGS[i % 5 == 0],
        )


def child(entries: int) -> dict[str, Any]:
    from tracepass.evaluator.stats import rolling

    ids = [f"conv-{i:09d}" for i in range(entries)]
    gc.collect()
    # Memory and tracked objects.
    tracemalloc.start()
    agg = rolling.RollingAggregator()
    gc.collect()
    objects0 = len(gc.get_objects())
    traced0 = tracemalloc.get_traced_memory()[0]
    _feed(agg, ids)
    gc.collect()
    traced = tracemalloc.get_traced_memory()[0] - traced0
    objects = len(gc.get_objects()) - objects0
    held = len(agg)
    tracemalloc.stop()
    del agg
    gc.collect()
    # CPU, untraced.
    agg = rolling.RollingAggregator()
    t0 = time.process_time()
    _feed(agg, ids)
    add_s = time.process_time() - t0
    now = 1_000.0 + entries * 0.005
    snaps = []
    for i in range(9):
        t0 = time.process_time()
        agg.snapshot(now + i * 0.001)
        snaps.append(time.process_time() - t0)
    t0 = time.process_time()
    state = agg.to_state()
    to_state_s = time.process_time() - t0
    text = json.dumps(state)
    t0 = time.process_time()
    again = rolling.RollingAggregator.from_state(json.loads(text))
    from_state_s = time.process_time() - t0
    assert len(again) == len(agg) - sum(1 for _ in range(19, entries, 20))  # tombstones
    return {
        "module": rolling.__file__,
        "held": held,
        "bytes_per_entry": traced / held,
        "objects_per_entry": objects / held,
        "add_us": add_s / entries * 1e6,
        "snapshot_ms": statistics.median(snaps) * 1e3,
        "to_state_ms": to_state_s * 1e3,
        "from_state_ms": from_state_s * 1e3,
    }


def run(tree: Path, entries: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree / "evaluator" / "src")}
    out = subprocess.run(
        [sys.executable, __file__, "--child", "--entries", str(entries)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    result: dict[str, Any] = json.loads(out.splitlines()[-1])
    if not result["module"].startswith(str(tree)):
        raise RuntimeError(f"{tree}: imported {result['module']} instead")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="source tree of the baseline")
    parser.add_argument("--entries", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.entries)))
        return
    trees = {"after": ROOT}
    if args.before is not None:
        trees = {"before": args.before.resolve(), **trees}
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    for _ in range(args.rounds):
        for name, tree in trees.items():
            runs[name].append(run(tree, args.entries))
    print(
        f"rolling windows, {args.entries:,} adds (2 keys, 54 tasks, 1 in 20 a revision), "
        f"median of {args.rounds} interleaved rounds, each in a fresh process"
    )
    fields = (
        ("bytes_per_entry", "bytes per entry (tracemalloc, ids excluded)", ".0f"),
        ("objects_per_entry", "GC-tracked objects per entry", ".3f"),
        ("add_us", "add, µs CPU each", ".2f"),
        ("snapshot_ms", "snapshot of the full windows, ms CPU", ".2f"),
        ("to_state_ms", "to_state (persist), ms CPU", ".1f"),
        ("from_state_ms", "from_state (restart), ms CPU", ".1f"),
    )
    if "before" not in runs:
        print("this tree only (no --before tree given: no ratio)")
    print(f"{'':45} " + " ".join(f"{name:>10}" for name in runs) + f" {'after/before':>13}")
    for key, label, fmt in fields:
        values = {name: statistics.median(r[key] for r in rs) for name, rs in runs.items()}
        b, a = values.get("before"), values["after"]
        ratio = f"{a / b:.2f}x" if b else "-"
        cells = " ".join(f"{format(v, fmt):>10}" for v in values.values())
        print(f"{label:45} {cells} {ratio:>13}")
    print(f"entries held: {runs['after'][0]['held']:,} (alive and superseded)")


if __name__ == "__main__":
    main()
