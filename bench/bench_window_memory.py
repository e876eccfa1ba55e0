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

`--day` (issue 36, item 3): 24 h of traffic at `--rate` (150) conversations/s on a
simulated clock into one `RollingAggregator` with the default config (windows 1 h and
24 h, the decayed window, 60 s buckets, 4,500 s revision horizon: what `tracepass
serve` builds with default assembly settings), 2 keys, 54 tasks, every 20th add a
revision of the conversation added 10 before. Measured in a fresh process per design: the
growth of its RSS (VmRSS, after `gc.collect()`) since before the aggregator existed,
after every simulated hour, conversation ids included (created on the fly: the windows
are what keeps them), plus CPU per add, the persisted state's size and `from_state`
(`tracemalloc` would multiply the run time by ten). The previous design (one entry per
conversation kept for 24 h: the oracle `tests/evaluator/_rolling_columns_oracle.py`,
the code at f528d52) is fed the same traffic for the first `--before-hours` (1) in
the same run; its 24 h figure is its bytes per entry times the entries 24 h hold
(rate x 86,400: every add is an entry it keeps for the longest window), extrapolated,
not measured.

    .venv/bin/python bench/bench_window_memory.py --day [--rate 150] [--hours 24]
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
    assert again.conversations() == agg.conversations() - sum(1 for _ in range(19, entries, 20))
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


def _feed_hour(agg: Any, hour: int, rate: int) -> None:
    """One simulated hour of `_feed`'s traffic at `rate` conversations per second."""
    per_hour = rate * 3600
    for i in range(hour * per_hour, (hour + 1) * per_hour):
        revise = i % 20 == 19
        agg.add(
            KEYS[i % 2],
            task=TASKS[i % 54],
            success=i % 5 != 0,
            now=i / rate,
            conversation_id=f"conv-{i - 10 if revise else i:09d}",
            revision=1 if revise else 0,
            tag=TAGS[i % 5 == 0],
        )


def _rss() -> int:
    """This process's resident set (VmRSS), bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def day_child(design: str, hours: int, rate: int) -> None:
    """Feed `hours` simulated hours into one design; a JSON line per hour: RSS growth
    since before the aggregator existed (gc collected), rows held, CPU per add."""
    if design == "bucketed":
        from tracepass.evaluator.stats.rolling import RollingAggregator as Agg
    else:
        sys.path.insert(0, str(ROOT / "tests" / "evaluator"))
        from _rolling_columns_oracle import RollingAggregator as Agg  # type: ignore[no-redef]
    gc.collect()
    base = _rss()
    agg: Any = Agg()
    for hour in range(hours):
        t0 = time.process_time()
        _feed_hour(agg, hour, rate)
        cpu = time.process_time() - t0
        gc.collect()
        row = {
            "hour": hour + 1,
            "rss": _rss() - base,
            "rows": len(agg),
            "add_us": cpu / (rate * 3600) * 1e6,
        }
        if design == "bucketed":
            row["indexed"] = agg.conversations()
            row["nbytes"] = agg.nbytes()
        print(json.dumps(row), flush=True)
    if design == "bucketed":
        t0 = time.process_time()
        agg.snapshot(hours * 3600.0)
        snapshot_ms = (time.process_time() - t0) * 1e3
        text = json.dumps(agg.to_state())
        t0 = time.process_time()
        type(agg).from_state(json.loads(text))
        from_ms = (time.process_time() - t0) * 1e3
        print(
            json.dumps(
                {"snapshot_ms": snapshot_ms, "state_mb": len(text) / 1e6, "from_state_ms": from_ms}
            )
        )


def _child_rows(design: str, hours: int, rate: int) -> list[dict[str, Any]]:
    out = subprocess.run(
        [
            sys.executable,
            __file__,
            "--day-child",
            design,
            "--hours",
            str(hours),
            "--rate",
            str(rate),
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def day(hours: int, rate: int, before_hours: int) -> None:
    print(
        f"rolling windows: {hours} h at {rate} conversations/s on a simulated clock, default config"
    )
    old = _child_rows("entries", before_hours, rate)
    new = _child_rows("bucketed", hours, rate)
    print(
        f"{'hour':>5} {'bucketed RSS MB':>16} {'own MB':>7} {'indexed':>10} {'rows':>10} "
        f"{'µs/add':>7} {'per-entry RSS MB':>17}"
    )
    for row in new[:-1]:
        h = row["hour"]
        prev = old[h - 1]["rss"] / 1e6 if h <= len(old) else float("nan")
        print(
            f"{h:>5} {row['rss'] / 1e6:>16.1f} {row['nbytes'] / 1e6:>7.1f} {row['indexed']:>10,} "
            f"{row['rows']:>10,} {row['add_us']:>7.2f} {prev:>17.1f}"
        )
    end, extra = new[-2], new[-1]
    print(
        f"bucketed after {hours} h: {end['rss'] / 1e6:.1f} MB of RSS growth (measured; its own "
        f"containers {end['nbytes'] / 1e6:.1f} MB, RollingAggregator.nbytes), snapshot "
        f"{extra['snapshot_ms']:.1f} ms CPU, persisted state {extra['state_mb']:.1f} MB, "
        f"from_state {extra['from_state_ms']:.0f} ms CPU"
    )
    last = old[-1]
    per_entry = last["rss"] / last["rows"]
    day_entries = rate * 86_400
    print(
        f"per-entry (previous design) after {last['hour']} h: {last['rss'] / 1e6:.1f} MB for "
        f"{last['rows']:,} entries = {per_entry:.0f} B per entry (measured, ids included), "
        f"{last['add_us']:.2f} µs CPU per add"
    )
    print(
        f"per-entry at 24 h, extrapolated: {per_entry:.0f} B x {day_entries:,} entries = "
        f"{per_entry * day_entries / 1e6:,.0f} MB; ratio to the bucketed {end['rss'] / 1e6:.1f} MB: "
        f"{per_entry * day_entries / end['rss']:.0f}x"
    )


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
    parser.add_argument("--day-child", choices=("bucketed", "entries"), help=argparse.SUPPRESS)
    parser.add_argument("--day", action="store_true", help="24 h at --rate on a simulated clock")
    parser.add_argument("--rate", type=int, default=150, help="conversations/s (--day)")
    parser.add_argument("--hours", type=int, default=24, help="simulated hours (--day)")
    parser.add_argument("--before-hours", type=int, default=1, help="previous design (--day)")
    args = parser.parse_args()
    if args.day_child:
        day_child(args.day_child, args.hours, args.rate)
        return
    if args.day:
        day(args.hours, args.rate, args.before_hours)
        return
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
