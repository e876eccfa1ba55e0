"""Run every benchmark in this folder, one after another, and print their reports.

Each script measures its own baseline in the same run and prints ratios, because
absolute times on shared 2-core machines swing by 2x with load; `make bench` is the
one command that regenerates the figures quoted in docs/performance.md. Scripts run in
separate processes so one benchmark's warm caches or threads cannot flatter another's.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ORDER = [
    "bench_instrumentation.py",
    "bench_decode.py",
    "bench_normalize.py",
    "bench_collector.py",
    "bench_e2e.py",
    "bench_memory.py",
    "bench_freshness.py",
    "bench_scaleout.py",
    "bench_evaluate.py",
    "bench_scoring.py",
    "bench_passk.py",
    "bench_compare.py",
]


def main() -> int:
    scripts = [HERE / name for name in ORDER if (HERE / name).exists()]
    scripts += sorted(p for p in HERE.glob("bench_*.py") if p.name not in ORDER)
    failed = []
    for script in scripts:
        print(f"\n=== {script.name} " + "=" * max(0, 60 - len(script.name)), flush=True)
        start = time.perf_counter()
        rc = subprocess.call([sys.executable, str(script), *sys.argv[1:]])
        print(f"--- {script.name}: exit {rc}, {time.perf_counter() - start:.1f}s", flush=True)
        if rc != 0:
            failed.append(script.name)
    if failed:
        print(f"\nfailed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
