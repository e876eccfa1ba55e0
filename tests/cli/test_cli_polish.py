"""The CLI as a user meets it: `--version`, help that fits 80 columns without type noise
and shows defaults, and a closed pipe (`... | head -1`) that ends quietly."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # starts a process or a server

HERE = Path(__file__).resolve().parent
TRACEPASS = str(Path(sys.executable).with_name("tracepass"))
COMMANDS = [
    [],
    ["conversations"],
    ["evaluate"],
    ["compare"],
    ["references", "validate"],
    ["references", "import"],
    ["references", "show"],
    ["review", "export"],
    ["review", "import"],
    ["serve"],
    ["demo"],
    ["probe"],
]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "80", "TERM": "dumb"}
    return subprocess.run(
        [TRACEPASS, *args], capture_output=True, text=True, timeout=300, env=env, check=False
    )


def test_version_names_the_three_distributions() -> None:
    out = _run("--version")
    assert out.returncode == 0
    lines = out.stdout.splitlines()
    assert [line.split()[0] for line in lines] == [
        "tracepass-collector",
        "tracepass-evaluator",
        "tracepass-instrumentation",
    ]
    assert all(re.fullmatch(r"\S+ \d+\.\d+\S*", line) for line in lines)


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "tracepass")
def test_help_fits_80_columns_without_type_noise(command: list[str]) -> None:
    out = _run(*command, "--help")
    assert out.returncode == 0, out.stderr
    too_long = [line for line in out.stdout.splitlines() if len(line) > 80]
    assert not too_long
    noise = re.findall(
        r"<(?:bool|str|int|float|path|list\[[^\]]*\]|int range|float range)>", out.stdout
    )
    assert not noise


def test_serve_help_states_the_default_ports_and_files() -> None:
    text = " ".join(_run("serve", "--help").stdout.split())
    for default in ("4317", "4318", "9464", "tracepass-state/state.sqlite", "batch"):
        assert default in text


def test_closed_pipe_ends_quietly_with_the_normal_exit_code(tmp_path: Path) -> None:
    traces = tmp_path / "many.binpb"
    subprocess.run(
        [sys.executable, str(HERE / "_make_traces.py"), str(traces), "--trials", "300"],
        check=True,
        timeout=120,
        capture_output=True,
    )
    proc = subprocess.Popen(
        [TRACEPASS, "conversations", str(traces), "--format", "json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline()  # like `| head -1`: read a line, then close the pipe
    proc.stdout.close()
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0
    assert b"Traceback" not in err
    assert b"BrokenPipe" not in err
