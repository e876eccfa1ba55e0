"""Issue 13 #9: every broken config, run through the real `tracepass serve --config`
executable, exits 2 with one line naming `file:line:col` — no traceback, no PyYAML
multi-line `"<unicode string>", line N` message, no silently accepted duplicate key."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

# 15 interpreters start at once: on a loaded 2-core machine (load average 40) that took
# over 120 s. The deadline only bounds a hang (an accepted config keeps running).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
DEADLINE_S = 480

TRACEPASS = Path(sys.executable).parent / "tracepass"

# name → (file content, expected line:col, a fragment of the message)
BROKEN: dict[str, tuple[bytes, str, str]] = {
    "bad indentation": (
        b"receiver:\n  host: 127.0.0.1\n   grpc_port: 1\n",
        "3:13",
        "mapping values are not allowed here",
    ),
    "unclosed quote": (b'receiver:\n  host: "127.0.0.1\n', "3:1", "found unexpected end"),
    "unclosed flow sequence": (b"references: [a, b\n", "2:1", "expected ',' or ']'"),
    "tab indentation": (b"receiver:\n\thost: x\n", "2:1", "found character '\\t'"),
    "undefined alias": (b"receiver: *nowhere\n", "1:11", "found undefined alias"),
    "duplicate top-level key": (
        b"receiver:\n  host: a\nstate:\n  durability: none\nreceiver:\n  grpc_port: 5\n",
        "5:1",
        "duplicate key 'receiver' (first on line 1)",
    ),
    "duplicate nested key": (
        b"metrics:\n  prometheus_port: 1\n  prometheus_port: 2\n",
        "3:3",
        "duplicate key 'prometheus_port' (first on line 2)",
    ),
    "not UTF-8": (b"receiver:\n  host: caf\xe9\n", "2:12", "not UTF-8: byte 0xe9"),
    "UTF-16": ("receiver: {}\n".encode("utf-16"), "1:1", "not UTF-8: byte 0xff"),
    "top level is a list": (b"- receiver\n", "1:1", "top level must be a mapping"),
    "unknown field": (
        b"receiver:\n  host: a\n  grpc_prot: 1\n",
        "3:3",
        "receiver.grpc_prot: unknown key; did you mean 'grpc_port'?",
    ),
    "wrong type": (
        b"state:\n  durability: batch\n  batch_max_delay_ms: soon\n",
        "3:3",
        "state.batch_max_delay_ms: Input should be a valid number",
    ),
    "out of range": (b"metrics:\n  prometheus_port: 70000\n", "2:3", "prometheus_port: Input"),
    "bad enum": (b"state:\n  durability: sometimes\n", "2:3", "state.durability: Input should"),
    "missing required field": (
        b"receiver:\n  tls:\n    cert_file: c.pem\n",
        "2:3",
        "receiver.tls.key_file: Field required",
    ),
    # conventions.custom (issue 25): patterns RE2 cannot run in linear time, bad paths,
    # unknown mapping fields are refused at start-up, located.
    "custom mapping regex with a back-reference": (
        b"conventions:\n  custom:\n    - name: a\n      kind: tool\n      match:\n"
        b"        span_name_regex: '(a)\\1'\n",
        "6:9",
        "conventions.custom.0.match.span_name_regex: Value error, invalid or too costly regex",
    ),
    "custom mapping unknown field": (
        b"conventions:\n  custom:\n    - name: a\n      kind: tool\n      match: {}\n"
        b"      fields:\n        argument: x\n",
        "7:9",
        "conventions.custom.0.fields.argument: unknown key; did you mean 'arguments'?",
    ),
}


def _run(config: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            str(TRACEPASS),
            "serve",
            "--config",
            str(config),
            # An accepted config (a test failure) must not bind fixed ports.
            "--host",
            "127.0.0.1",
            "--grpc-port",
            "0",
            "--http-port",
            "0",
            "--metrics-port",
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_each_broken_config_exits_2_with_file_line_col(tmp_path: Path) -> None:
    procs = {}
    for i, (name, (content, _, _)) in enumerate(sorted(BROKEN.items())):
        cfg = tmp_path / f"broken{i}.yaml"
        cfg.write_bytes(content)
        procs[name] = (cfg, _run(cfg))  # all at once: the import times overlap
    failures = []
    deadline = time.monotonic() + DEADLINE_S
    for name, (cfg, proc) in procs.items():
        try:
            _out, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:  # the config was accepted: a collector is running
            proc.kill()
            _out, err = proc.communicate()
        _, position, fragment = BROKEN[name]
        lines = [line for line in err.splitlines() if line.strip()]
        ok = (
            proc.returncode == 2
            and "Traceback" not in err
            and "<unicode string>" not in err
            and len(lines) == 1
            and re.match(rf"error: {re.escape(str(cfg))}:{position}: ", lines[0]) is not None
            and fragment in lines[0]
        )
        if not ok:
            failures.append(f"{name}: exit {proc.returncode}, stderr={err!r}")
    assert not failures, "\n".join(failures)
