"""The compiled evaluation core against the pure-Python path, measured in the same run.

What moved into Rust (issue 36 lever 2, `tracepass._evaluator_core`): call pairing,
argument matching and the selection / parameters / sequence dimensions of tool
correctness (`tool_correctness.score_turn`; utilization, the result models, answers and
trajectories stay in Python). Prints, as the median (min .. max) of interleaved repeats,
CPU µs per 3-turn conversation (`time.process_time`, this process only):

* **moved part**: exactly what the kernel replaces, on every turn: `NativeTurn.score`
  vs `assign_calls` + the three dimensions' arithmetic (names resolved beforehand);
* **score_turn**: `score_turn` on every turn of every conversation, native vs Python
  (the same `CompiledTurn` with its native form removed);
* **Evaluator.evaluate**: the whole deterministic scoring of a conversation (answers,
  trajectories, result models), native vs Python;
* **Evaluator + stored row**: the same plus `encode_result` (the state file's row),
  to set the saving against the per-conversation cost the store adds.

Data: `bench_scoring.make_data` (50 references, 3 turns, 1–3 expected calls each, exact
arguments; 20 % of calls with a wrong argument, 20 % of turns out of order), the same
conversations both ways. Both paths' results are checked equal before timing.

    .venv/bin/python bench/bench_native_core.py [--conversations N] [--repeats R]
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import statistics
import time
from collections.abc import Callable
from typing import Any

from bench_scoring import make_data
from tracepass.collector.state.codec import StoredResult, encode_result
from tracepass.evaluator import native_core
from tracepass.evaluator.scoring import tool_correctness as tc_module
from tracepass.evaluator.scoring.evaluator import EvaluationConfig, Evaluator
from tracepass.evaluator.scoring.tool_correctness import (
    DEFAULT_WEIGHTS,
    assign_calls,
    called_names,
    compile_turn,
    lis_length,
    score_turn,
)


class _PythonPath:
    """Inside: `compile_turn` attaches no native form (the Evaluator compiles each
    reference on first use, so the whole evaluation runs inside)."""

    def __enter__(self) -> None:
        self.real = tc_module.native_turn
        tc_module.native_turn = lambda *a, **k: None  # type: ignore[assignment]

    def __exit__(self, *exc: object) -> None:
        tc_module.native_turn = self.real


def _cpu_us(fn: Callable[[], Any], n: int) -> float:
    gc.collect()
    gc.disable()
    try:
        t0 = time.process_time()
        fn()
        return (time.process_time() - t0) / n * 1e6
    finally:
        gc.enable()


def _fmt(xs: list[float]) -> str:
    return f"{statistics.median(xs):7.2f} µs [{min(xs):.2f} .. {max(xs):.2f}]"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--conversations", type=int, default=3000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    if native_core.native_module() is None:
        raise SystemExit(f"the compiled core is not active: {native_core.core_description()}")
    data = make_data(args.conversations)
    n = len(data)

    # --- the kernel alone: score_turn on every turn
    compiled: dict[int, tuple[Any, Any]] = {}
    jobs: list[tuple[Any, Any, Any]] = []
    for conv, ref in data:
        for t, rt in zip(conv.turns, ref.turns, strict=False):
            key = id(rt)
            if key not in compiled:
                ct = compile_turn(rt)
                assert ct is not None
                assert ct.native is not None
                compiled[key] = (ct, dataclasses.replace(ct, native=None))
            nat, py = compiled[key]
            jobs.append((t, nat, py))

    def kernel(which: int) -> Callable[[], None]:
        def run() -> None:
            for t, *cts in jobs:
                score_turn(
                    t.tool_calls, cts[which], t.answer, t.final_answer_uses_tools,
                    DEFAULT_WEIGHTS, 1.0, "auto",
                )  # fmt: skip

        return run

    named = [(t.tool_calls, called_names(t.tool_calls, nat), nat, py) for t, nat, py in jobs]
    named = [x for x in named if x[0] and x[2].expected]

    def moved_native() -> None:
        for calls, names, nat, _ in named:
            nat.native.score(calls, names)

    def moved_python() -> None:
        for calls, names, _, py in named:
            pairs = assign_calls(calls, py, names)
            p = len(pairs)
            n_e = len(py.expected)
            _ = p / (len(calls) + n_e - p), sum([x[2] for x in pairs]) / n_e
            if py.sequence_matters:
                js = [x[1] for x in pairs]
                _ = (p if js == sorted(js) else lis_length(js)) / n_e

    for t, nat, py in jobs[:2000]:
        a = (t.answer, t.final_answer_uses_tools, DEFAULT_WEIGHTS, 1.0, "auto")
        assert score_turn(t.tool_calls, nat, *a) == score_turn(t.tool_calls, py, *a)

    # --- whole evaluation, and evaluation + stored row
    config = EvaluationConfig()
    ev_native, ev_python = Evaluator(config), Evaluator(config)
    for conv, ref in data[:500]:
        got = ev_native.evaluate(conv, ref).model_dump_json()
        with _PythonPath():
            assert got == ev_python.evaluate(conv, ref).model_dump_json()

    def evaluate(ev: Evaluator, store: bool) -> Callable[[], None]:
        def run() -> None:
            for conv, ref in data:
                result = ev.evaluate(conv, ref)
                if store:
                    encode_result(StoredResult(conversation=conv, result=result, revision=1))

        if ev is ev_python:

            def python_run() -> None:
                with _PythonPath():
                    run()

            return python_run

        return run

    figures: dict[str, tuple[list[float], list[float]]] = {
        "moved part (pairing, 3 turns)": ([], []),
        "score_turn (3 turns)": ([], []),
        "Evaluator.evaluate": ([], []),
        "Evaluator.evaluate + stored row": ([], []),
    }
    runs = {
        "moved part (pairing, 3 turns)": (moved_native, moved_python),
        "score_turn (3 turns)": (kernel(0), kernel(1)),
        "Evaluator.evaluate": (evaluate(ev_native, False), evaluate(ev_python, False)),
        "Evaluator.evaluate + stored row": (evaluate(ev_native, True), evaluate(ev_python, True)),
    }
    for fn_n, fn_p in runs.values():  # warm up both
        fn_n()
        fn_p()
    for r in range(args.repeats):
        for name, (fn_n, fn_p) in runs.items():
            order = ((0, fn_n), (1, fn_p)) if r % 2 == 0 else ((1, fn_p), (0, fn_n))
            for which, fn in order:
                figures[name][which].append(_cpu_us(fn, n))

    print(f"core: {native_core.core_description()}; {n} conversations × {args.repeats} repeats")
    print(f"{'CPU per conversation':34} {'native':30} {'python':30} ratio")
    for name, (nat, py) in figures.items():
        ratio = statistics.median(nat) / statistics.median(py)
        saved = statistics.median(py) - statistics.median(nat)
        print(f"{name:34} {_fmt(nat):30} {_fmt(py):30} {ratio:.2f}× ({-saved:+.1f} µs)")


if __name__ == "__main__":
    main()
