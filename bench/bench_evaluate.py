"""`tracepass evaluate --dataset` per-turn cost, against Fair Forge's own scoring of the
same data in the same run.

The dataset is Fair Forge's agentic sample (tests/data/fair-forge) repeated to
`--copies` x 3 conversations x 3 turns with distinct session ids. tracepass runs the
whole `tracepass evaluate --dataset FILE --profile fair-forge --format json` command
in this process (typer's runner on the command tree the `tracepass` entry point builds
for these arguments, `app_for`: load + validate the dataset, score every turn with the
default `contains` grader, pass@k / pass^k with credible intervals, the JSON report); the
figure is this process's CPU time per turn, median of `--repeats`. The same command on the
sample alone (9 turns) gives the fixed cost of one invocation (building the click
command, option parsing, the event loop; not imports: a warm-up run pays those), and
(whole - fixed) / (turns - 9) the marginal cost per turn.

`--processes R` (default 3) also runs each command as a user does, a fresh interpreter
per run (imports included: numpy and scipy, pydantic, typer; median of R), on the
9-turn sample and on the whole file: `tracepass evaluate` (the entry point) and Fair
Forge's own scoring script (`_fairforge_scoring.py FILE 1`: its imports, one load +
score). CPU of the child process (`RUSAGE_CHILDREN`: user + system).

Fair Forge (`alquimia-fair-forge`) is not a tracepass dependency: when a bench-only
environment has it (`--fairforge-python`, default /work/fwenv/fairforge/bin/python), its
own tool scoring (`Agentic._evaluate_tool_correctness` per turn, judge bypassed) runs on
the same file in a subprocess, timed there (loading into its `Dataset` models and
scoring separately). Without it, the same-run baseline is a json.load of the file, and
the Fair Forge comparison is reported as not run.

    .venv/bin/python bench/bench_evaluate.py [--copies N] [--repeats R]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from typer.testing import CliRunner

from tracepass.collector.app.cli.main import app_for

SAMPLE = Path(__file__).resolve().parents[1] / "tests/data/fair-forge/dataset_agentic.json"
HERE = Path(__file__).resolve().parent


def write_dataset(path: Path, copies: int) -> int:
    sample = json.loads(SAMPLE.read_text(encoding="utf-8"))
    out = []
    for i in range(copies):
        for session in sample:
            out.append({**session, "session_id": f"{session['session_id']}-{i}"})
    path.write_text(json.dumps(out), encoding="utf-8")
    return sum(len(s["conversation"]) for s in out)


def tracepass_cpu(path: Path, report: Path) -> float:
    runner = CliRunner()
    args = ["evaluate", "--dataset", str(path), "--profile", "fair-forge"]
    args += ["--format", "json", "--output", str(report), "--no-readiness-gate"]
    c0 = time.process_time()
    res = runner.invoke(app_for(args), args, catch_exceptions=False)
    cpu = time.process_time() - c0
    assert res.exit_code == 0, res.output
    return cpu


def load_and_score_cpu(path: Path) -> float:
    """The part of `evaluate` Fair Forge's figure covers: load the dataset into models
    and score every turn (same library calls as the command, no report)."""
    import asyncio

    from tracepass.collector.app.cli.serve import tuned_gc
    from tracepass.evaluator.offline.evaluation_run import evaluate_all
    from tracepass.evaluator.references import load_dataset
    from tracepass.evaluator.references.matching import ReferenceCatalog
    from tracepass.evaluator.scoring.evaluator import EvaluationConfig, Evaluator

    with tuned_gc():
        c0 = time.process_time()
        imported = load_dataset(path)
        evaluator = Evaluator(EvaluationConfig(profile="fair-forge"))
        catalog = ReferenceCatalog([imported.reference_set])
        asyncio.run(evaluate_all(imported.conversations, catalog, evaluator, concurrency=8))
        return time.process_time() - c0


def child_cpu(argv: list[str]) -> float:
    """CPU seconds (user + system) of one child process running `argv`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def tracepass_process_argv(path: Path, report: Path) -> list[str]:
    entry = "from tracepass.collector.app.cli.main import main; main()"
    command = ["evaluate", "--dataset", str(path), "--output", str(report)]
    options = ["--profile", "fair-forge", "--format", "json", "--no-readiness-gate"]
    return [sys.executable, "-c", entry, *command, *options]


def process_figures(
    files: dict[str, Path], report: Path, repeats: int, fairforge_python: str | None
) -> None:
    """Whole processes, as a user runs them: imports included (see the docstring)."""
    print(f"whole processes (fresh interpreter each, imports included; median of {repeats}):")
    for label, path in files.items():
        ours = statistics.median(
            child_cpu(tracepass_process_argv(path, report)) for _ in range(repeats)
        )
        line = f"  {label:<22}: tracepass evaluate {ours:6.2f} CPU-s"
        if fairforge_python is not None:
            argv = [fairforge_python, str(HERE / "_fairforge_scoring.py"), str(path), "1"]
            theirs = statistics.median(child_cpu(argv) for _ in range(repeats))
            line += f"; Fair Forge load + tool scoring {theirs:6.2f} CPU-s ({ours / theirs:.2f}x)"
        print(line)


def json_load_cpu(path: Path) -> float:
    c0 = time.process_time()
    json.loads(path.read_bytes())
    return time.process_time() - c0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--fairforge-python", default="/work/fwenv/fairforge/bin/python")
    parser.add_argument("--processes", type=int, default=3, help="0: in process only")
    args = parser.parse_args()
    fairforge = args.fairforge_python if Path(args.fairforge_python).exists() else None
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "dataset.json"
        turns = write_dataset(data, args.copies)
        tracepass_cpu(data, Path(tmp) / "warm.json")  # imports, first-call caches
        ours = [tracepass_cpu(data, Path(tmp) / "r.json") / turns for _ in range(args.repeats)]
        small = Path(tmp) / "sample.json"
        small_turns = write_dataset(small, 1)
        fixed = statistics.median(
            tracepass_cpu(small, Path(tmp) / "s.json") for _ in range(max(3, args.repeats))
        )
        base = [json_load_cpu(data) / turns for _ in range(args.repeats)]
        core = [load_and_score_cpu(data) / turns for _ in range(args.repeats)]
        if args.processes > 0:
            files = {f"{small_turns}-turn sample": small, f"{turns:,} turns": data}
            process_figures(files, Path(tmp) / "p.json", args.processes, fairforge)
        ff: list[dict[str, float]] | None = None
        if fairforge is not None:
            out = subprocess.run(
                [
                    args.fairforge_python,
                    str(HERE / "_fairforge_scoring.py"),
                    str(data),
                    str(args.repeats),
                ],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            ff = json.loads(out.strip().splitlines()[-1])
    us = statistics.median(ours) * 1e6
    b = statistics.median(base) * 1e6
    print(f"{turns:,} turns ({turns // 3:,} conversations); median of {args.repeats}; CPU time")
    print(f"{'baseline: json.load of the dataset':<48}: {b:8.1f} us/turn")
    print(
        f"{'tracepass evaluate --profile fair-forge (whole)':<48}: {us:8.1f} us/turn  "
        f"({us / b:.1f}x json.load) [{min(ours) * 1e6:.1f} .. {max(ours) * 1e6:.1f}]"
    )
    marginal = (statistics.median(ours) * turns - fixed) / (turns - small_turns) * 1e6
    print(
        f"{'  fixed per invocation (the 9-turn sample)':<48}: {fixed * 1e3:8.1f} ms; marginal "
        f"{marginal:.1f} us/turn"
    )
    c = statistics.median(core) * 1e6
    print(
        f"{'  of which load + score (no report)':<48}: {c:8.1f} us/turn  "
        f"[{min(core) * 1e6:.1f} .. {max(core) * 1e6:.1f}]; the rest: report + fixed"
    )
    if ff is None:
        print("Fair Forge: not installed in a bench-only environment; comparison not run")
        return
    load = statistics.median(r["load_s"] / r["turns"] for r in ff) * 1e6
    score = statistics.median(r["score_s"] / r["turns"] for r in ff) * 1e6
    print(f"{'Fair Forge load (Dataset models)':<48}: {load:8.1f} us/turn")
    print(f"{'Fair Forge tool scoring (judge bypassed)':<48}: {score:8.1f} us/turn")
    print(
        f"{'Fair Forge load + tool scoring':<48}: {load + score:8.1f} us/turn  "
        f"(tracepass whole / Fair Forge = {us / (load + score):.2f}x, marginal "
        f"{marginal / (load + score):.2f}x, load + score {c / (load + score):.2f}x)"
    )
    print("target: tracepass evaluate <= Fair Forge's own time per turn (load + scoring)")


if __name__ == "__main__":
    main()
