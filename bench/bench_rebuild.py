"""CPU per conversation of `build_conversation` (the rebuild `serve` does once per
completed conversation) on the end-to-end workload, next to a baseline measured in the
same run, and optionally against another source tree of tracepass in the same run.

Why in process: `bench_e2e.py` measures the whole server, where the rebuild is one
share among many (and its figure moves with GC and the other stages); this isolates it,
on the very conversations the end-to-end run evaluates (`_e2e.py`, `--shapes`: 16 = 3
turns x (agent span + 4 tool spans) + the end marker; 9 = 3 turns x (agent span + 1-3
tool spans); the mix's wrong arguments and answers, p = 0.1 per turn; `models`: 2 turns
x (agent span + a model call with token usage + 2 tool spans), `bench_collector.py`'s
conversations, for the figures of priced model calls). Records are
normalized once outside the timed loop and grouped per conversation in arrival order,
as the assembler hands them over. The baseline is the least any rebuild does with the
same records: index them by (trace id, span id) and sort them by start time. GC as in
`serve` (`tune_gc`); CPU time of this process; repetitions alternate, medians reported.

`--against DIR` (a source snapshot of tracepass, e.g. `git worktree add /tmp/base REV`
with its own `make setup`): each repetition runs this script's measurement once with
this tree and once with DIR's code (DIR/.venv's Python if there is one, else this
Python with DIR's `src` directories first on the path), alternating which goes first,
both on the same payloads (built by this tree's `_e2e.py`); the ratio is of the medians.

    .venv/bin/python bench/bench_rebuild.py [--requests N] [--repeats R] [--shapes 9,16,models]
        [--against DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from operator import attrgetter
from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from _e2e import SPANS_PER_REQUEST, shaped_requests
from bench_collector import payload as model_call_payload
from tracepass.collector.app.cli.serve import tune_gc
from tracepass.collector.assembly import build_conversation
from tracepass.collector.normalize import SpanRecord, normalize_request

Groups = Sequence[tuple[str, tuple[SpanRecord, ...]]]
_BY_START = attrgetter("start_ns", "span_id")
FAIL_P = 0.1  # as bench_e2e.py's mix
# `bench_collector.py --usage-only`'s conversations: 2 turns x (agent span + a model call
# with token usage, priced by the library + 2 tool spans) — real agents' turns have model
# calls, the e2e shapes none.
MODELS = "models"


def conversations(n_requests: int, shape: str) -> Groups:
    if shape == MODELS:
        payloads = [model_call_payload(k, model_calls=True) for k in range(n_requests)]
        convs = n_requests * SPANS_PER_REQUEST // 8
    else:
        payloads, convs, _, _ = shaped_requests(n_requests, int(shape), FAIL_P)
    by_conv: dict[str, list[SpanRecord]] = {}
    for payload in payloads:
        records, _ = normalize_request(ExportTraceServiceRequest.FromString(payload))
        for rec in records:
            assert rec.conversation_id is not None
            by_conv.setdefault(rec.conversation_id, []).append(rec)
    assert len(by_conv) == convs
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


def measure(n_requests: int, shapes: Sequence[str], repeats: int) -> dict[str, object]:
    """µs per conversation (baseline, rebuild) per shape, `repeats` alternating loops."""
    tune_gc()
    out: dict[str, object] = {
        "code": str(Path(sys.modules[build_conversation.__module__].__file__ or "").resolve())
    }
    for shape in shapes:
        groups = conversations(n_requests, shape)
        turns = 2 if shape == MODELS else 3
        assert rebuild(groups) == turns * len(groups)  # every conversation with all its turns
        base: list[float] = []
        full: list[float] = []
        for _ in range(repeats):
            base.append(_cpu(baseline, groups) / len(groups) * 1e6)
            full.append(_cpu(rebuild, groups) / len(groups) * 1e6)
        out[shape] = {"conversations": len(groups), "baseline": base, "rebuild": full}
    return out


def _child(tree: Path | None, args: argparse.Namespace) -> dict[str, object]:
    """One measurement in a fresh process, with `tree`'s code (None: this tree's)."""
    python = sys.executable
    env = dict(os.environ)
    if tree is not None:
        own = tree / ".venv" / "bin" / "python"
        if own.exists():
            python = str(own)
        else:
            srcs = [str(tree / d / "src") for d in ("collector", "evaluator", "instrumentation")]
            env["PYTHONPATH"] = os.pathsep.join([*srcs, env.get("PYTHONPATH", "")])
    cmd = [python, __file__, "--child", "--requests", str(args.requests), "--shapes", args.shapes]
    cmd += ["--repeats", str(args.inner)]
    done = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--shapes", default="16", help=f"comma-separated: 9, 16, {MODELS}")
    parser.add_argument("--against", type=Path, default=None, help="another source tree")
    parser.add_argument("--inner", type=int, default=3, help="loops per process (--against)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args, _ = parser.parse_known_args()  # run_all.py passes every script the same flags
    shapes = args.shapes.split(",")
    if args.child:
        print(json.dumps(measure(args.requests, shapes, args.repeats)))
        return
    if args.against is None:
        result = measure(args.requests, shapes, args.repeats)
        for shape in shapes:
            found = result[shape]
            assert isinstance(found, dict)
            b, f = statistics.median(found["baseline"]), statistics.median(found["rebuild"])
            print(
                f"{shape}: {found['conversations']:,} conversations, median of"
                f" {args.repeats}: baseline (index + sort) {b:6.1f} us, build_conversation"
                f" {f:6.1f} us/conversation ({f / b:.1f}x baseline)"
                f"  [{min(found['rebuild']):.1f} .. {max(found['rebuild']):.1f}]"
            )
        return
    runs: dict[str, list[dict[str, object]]] = {"this": [], "against": []}
    for k in range(args.repeats):
        order = ("this", "against") if k % 2 == 0 else ("against", "this")
        for side in order:
            runs[side].append(_child(None if side == "this" else args.against, args))
    print(f"this tree   : {runs['this'][0]['code']}")
    print(f"against     : {runs['against'][0]['code']}")
    print(
        f"{args.repeats} processes each, alternating, {args.inner} loops per process;"
        " medians over every loop (us CPU per conversation)"
    )
    for shape in shapes:
        cell: dict[str, tuple[float, float]] = {}
        for side, results in runs.items():
            base = [v for r in results for v in r[shape]["baseline"]]  # type: ignore[index]
            full = [v for r in results for v in r[shape]["rebuild"]]  # type: ignore[index]
            cell[side] = (statistics.median(base), statistics.median(full))
        (tb, tf), (ab, af) = cell["this"], cell["against"]
        print(
            f"  {shape}: build_conversation {af:6.1f} (against) -> {tf:6.1f} (this)"
            f" = {tf / af:.2f}x;  baseline index + sort {ab:5.1f} / {tb:5.1f}"
        )


if __name__ == "__main__":
    main()
