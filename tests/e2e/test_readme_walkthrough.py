"""The README's "Install" and "Five minutes" steps, run as written in a clean virtual
environment: install from the checkout, write the agent and the reference file the README
shows, run `tracepass serve` and the agent, see pass^k on /metrics, gate on the recorded
traces.

Substitutions, and only these: `pip install` runs as `uv pip install` (the same
resolution, from uv's cache instead of a slow network), and the collector listens on free
ports (`--grpc-port 0 --http-port 0 --metrics-port 0`, the agent pointed at it with
OTEL_EXPORTER_OTLP_ENDPOINT, which `configure()` honours), since parallel tests may hold
the default ones.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _live_support import scrape, select, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
UV = ROOT / ".tools" / "bin" / "uv"
_BLOCK = re.compile(r"<!-- walkthrough: (?P<name>[^>]+?) -->\s*```[a-z]*\n(?P<body>.*?)```", re.S)
_INSTALL = re.compile(r"^pip install (.+)$", re.M)


def _blocks() -> dict[str, str]:
    text = README.read_text(encoding="utf-8")
    return {m["name"]: textwrap.dedent(m["body"]) for m in _BLOCK.finditer(text)}


def _install_line() -> str:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Install", 1)[1].split("\n## ", 1)[0]
    match = _INSTALL.search(section)
    assert match, "README's Install section has no `pip install` line"
    return match.group(1)


def test_readme_blocks_are_present() -> None:
    blocks = _blocks()
    assert {"agent.py", "references/weather.yaml", "commands", "gate"} <= set(blocks)


@pytest.mark.skipif(not UV.exists(), reason="uv is bootstrapped by `make setup`")
def test_readme_walkthrough_runs_as_written(tmp_path: Path) -> None:
    blocks = _blocks()
    venv = tmp_path / "venv"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "VIRTUAL_ENV", "UV_"))}
    subprocess.run([str(UV), "venv", "--python", sys.executable, str(venv)], check=True, env=env)
    bin_dir = venv / "bin"
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    env["VIRTUAL_ENV"] = str(venv)
    install = subprocess.run(
        [str(UV), "pip", "install", "--python", str(bin_dir / "python"),
         *shlex.split(_install_line())],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=400, check=False,
    )  # fmt: skip
    assert install.returncode == 0, install.stderr

    work = tmp_path / "work"
    for name in ("agent.py", "references/weather.yaml"):
        path = work / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(blocks[name], encoding="utf-8")
    serve_cmd, agent_cmd = [line for line in blocks["commands"].splitlines() if line.strip()]
    assert serve_cmd.startswith("tracepass serve")
    ports_file = tmp_path / "ports.json"
    serve_args = [
        *shlex.split(serve_cmd),
        "--grpc-port", "0", "--http-port", "0", "--metrics-port", "0",
        "--host", "127.0.0.1", "--ports-file", str(ports_file),
    ]  # fmt: skip
    stderr = (tmp_path / "serve.stderr").open("wb")
    server = subprocess.Popen(
        serve_args, cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=stderr
    )
    try:
        ports = wait_until(
            lambda: json.loads(ports_file.read_text()) if ports_file.exists() else None,
            120,
            "tracepass serve to listen",
        )
        agent_env = {**env, "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{ports['http_port']}"}
        done = subprocess.run(
            shlex.split(agent_cmd), cwd=work, env=agent_env, capture_output=True, text=True,
            timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        metrics_url = f"http://127.0.0.1:{ports['metrics_port']}/metrics"
        samples = wait_until(
            lambda: select(scrape(metrics_url), "tracepass_pass_pow_k") or None,
            60,
            "tracepass_pass_pow_k on /metrics",
        )
        assert any(s[1].get("k") == "3" for s in samples)
        assert (work / "traces.jsonl").exists()  # configure(record_to=...) recorded the run
        gate = subprocess.run(
            shlex.split(blocks["gate"].strip()), cwd=work, env=env, capture_output=True,
            text=True, timeout=120, check=False,
        )  # fmt: skip
        assert gate.returncode == 0, gate.stderr
        # What the README says it prints: the gate, and the readiness line.
        assert "gate PASS: pass_pow_k@3 unbiased estimate 1.000 >= required 0.8" in gate.stderr
        readiness = next(x for x in gate.stdout.splitlines() if x.startswith("readiness: "))
        assert readiness.startswith(
            "readiness: inconclusive (pass^3 95% interval [0.65, 1.00] holds the target 0.70;"
        )
        readme = " ".join(README.read_text(encoding="utf-8").split())
        assert readiness.split(";")[0] + "; …)" in readme
    finally:
        server.terminate()
        server.wait(timeout=300)
        stderr.close()


def test_install_line_installs_what_the_readme_uses() -> None:
    """The README shows HTML reports (`--format html`, the demo's report): its install
    line brings the `[report]` extra they need."""
    text = README.read_text(encoding="utf-8")
    assert "--format html" in text
    assert "./collector[all]" in shlex.split(_install_line())
