"""`tracepass probe` end to end against the example agent: in-process module target,
HTTP target with a running collector, cmd target with the embedded collector, and an
interrupted run resumed from its checkpoint. Per-reference numbers are checked against
C(c,k)/C(n,k) computed from the reported trials."""

from __future__ import annotations

import json
import math
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _live_support import (
    FAST_CONFIG,
    REPO,
    TRACEPASS,
    TRAVEL_AGENT,
    clean_env,
    serve,
    wait_until,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]

REFS = str(REPO / "examples" / "references")
N_REFS = 7


def probe(*args: str, env: dict[str, str] | None = None, timeout: float = 240) -> dict[str, Any]:
    done = subprocess.run(
        [TRACEPASS, "probe", "--references", REFS, "--format", "json", "--no-progress", *args],
        capture_output=True, text=True, env=env or clean_env(), timeout=timeout,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    doc: dict[str, Any] = json.loads(done.stdout)
    return doc


def check_unbiased(doc: dict[str, Any], ks: list[int]) -> None:
    for row in doc["references"]:
        trials = [t for t in doc["trials"] if t["reference_id"] == row["reference_id"]]
        n = sum(1 for t in trials if t["outcome"] in ("pass", "fail", "incomplete"))
        c = sum(1 for t in trials if t["correct"])
        assert (row["trials"], row["correct"]) == (n, c)
        for k in ks:
            assert row["pass_pow_k"][str(k)]["unbiased"] == pytest.approx(
                math.comb(c, k) / math.comb(n, k)
            )
            assert row["pass_at_k"][str(k)]["unbiased"] == pytest.approx(
                1 - math.comb(n - c, k) / math.comb(n, k)
            )


def test_probe_module_target(tmp_path: Path) -> None:
    env = clean_env(TRAVEL_AGENT_REGRESSION="0.4", TRAVEL_AGENT_SEED="5")
    # The regressed agent is readiness "needs improvement": report only, no gate.
    doc = probe(
        "--agent", f"{TRAVEL_AGENT}:answer", "--trials", "4", "--k", "1,2,4",
        "--no-readiness-gate", env=env,
    )  # fmt: skip
    assert len(doc["trials"]) == N_REFS * 4
    run_id = doc["run"]["run_id"]
    for t in doc["trials"]:
        assert t["conversation_id"] == f"probe-{run_id}-{t['reference_id']}-{t['trial']}"
        assert t["evaluation"]["reference_id"] == t["reference_id"]
        assert t["outcome"] in ("pass", "fail")
    # Multi-turn references were played turn by turn in one conversation.
    flights = [t for t in doc["trials"] if t["reference_id"] == "flights-paris-lisbon"]
    assert all(len(t["evaluation"]["turns"]) == 2 for t in flights)
    check_unbiased(doc, [1, 2, 4])
    assert doc["summary"]["trials"] == N_REFS * 4
    assert 0 < doc["summary"]["correct"] < N_REFS * 4  # the regression knob bites
    greeting = next(r for r in doc["references"] if r["reference_id"] == "greeting")
    assert greeting["pass_pow_k"]["4"]["unbiased"] == 1.0  # no tools: nothing to get wrong


def test_probe_http_target_with_running_collector(tmp_path: Path) -> None:
    with serve(tmp_path, "--references", REFS, config=FAST_CONFIG) as s:
        agent = subprocess.Popen(
            [sys.executable, str(TRAVEL_AGENT), "--endpoint", s.http, "serve-http", "--port", "0"],
            stdout=subprocess.PIPE, text=True, env=clean_env(),
        )  # fmt: skip
        try:
            assert agent.stdout is not None
            line = agent.stdout.readline()
            url = json.loads(line)["listening"]
            doc = probe("--agent", url, "--trials", "2", "--collector", s.http)
        finally:
            agent.send_signal(signal.SIGINT)
            try:
                agent.wait(timeout=120)
            except subprocess.TimeoutExpired:
                # Not what this test checks; killing it lets probe's own error surface.
                agent.kill()
                agent.wait(timeout=60)
        assert s.terminate() == 0
    assert len(doc["trials"]) == N_REFS * 2
    assert all(t["outcome"] == "pass" for t in doc["trials"]), [
        (t["reference_id"], t["outcome"], t["error"]) for t in doc["trials"]
    ]
    check_unbiased(doc, [1, 2])
    assert doc["run"]["collector"] == s.http


def test_probe_cmd_target_embedded_collector(tmp_path: Path) -> None:
    doc = probe(
        "--agent", f"cmd:{sys.executable} {TRAVEL_AGENT} stdio", "--trials", "2",
        "--concurrency", "2",
    )  # fmt: skip
    assert len(doc["trials"]) == N_REFS * 2
    assert all(t["outcome"] == "pass" for t in doc["trials"]), [
        (t["reference_id"], t["outcome"], t["error"]) for t in doc["trials"]
    ]
    assert doc["summary"]["pass_pow_k"]["2"]["unbiased"] == 1.0


def test_probe_resume_after_interruption(tmp_path: Path) -> None:
    ckpt = tmp_path / "probe.ckpt"
    args = [
        "--agent", f"{TRAVEL_AGENT}:answer", "--trials", "3", "--checkpoint", str(ckpt),
    ]  # fmt: skip
    first = subprocess.Popen(
        [TRACEPASS, "probe", "--references", REFS, "--no-progress", "--rate", "2",
         "--concurrency", "1", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=clean_env(),
    )  # fmt: skip
    try:
        wait_until(
            lambda: ckpt.exists() and len(ckpt.read_text().splitlines()) >= 5,
            180,
            "four finished trials in the checkpoint",
        )
        first.send_signal(signal.SIGINT)
        _, err = first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait(timeout=120)
    assert first.returncode == 130, err
    assert "--resume" in err
    lines = ckpt.read_text().splitlines()
    header = json.loads(lines[0])
    before = {json.loads(x)["conversation_id"] for x in lines[1:]}
    assert 4 <= len(before) < N_REFS * 3

    doc = probe(*args, "--resume")
    ids = [t["conversation_id"] for t in doc["trials"]]
    assert len(ids) == N_REFS * 3
    assert len(set(ids)) == len(ids)
    assert before <= set(ids)  # finished trials were kept, not re-run
    assert doc["run"]["run_id"] == header["run_id"]
    assert len(ckpt.read_text().splitlines()) == 1 + N_REFS * 3


def test_probe_progress_bar_on_stderr_json_on_stdout() -> None:
    """With a terminal (forced by TTY_COMPATIBLE=1) the bar draws on stderr; stdout
    still holds nothing but the JSON document."""
    done = subprocess.run(
        [TRACEPASS, "probe", "--references", REFS, "--agent", f"{TRAVEL_AGENT}:answer",
         "--trials", "1", "--format", "json", "--progress"],
        capture_output=True, text=True, timeout=240,
        env=clean_env(TTY_COMPATIBLE="1", COLUMNS="120"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert len(doc["trials"]) == N_REFS
    assert "probing" in done.stderr
    assert f"{N_REFS}/{N_REFS}" in done.stderr


def test_probe_gates_exit_1_on_a_regression_and_0_when_met() -> None:
    """`--fail-under` on the suite summary, as in `evaluate`: a regressed agent fails the
    gate (exit 1, the JSON still on stdout with the gate verdicts), a lenient gate passes."""
    env = clean_env(TRAVEL_AGENT_REGRESSION="0.6", TRAVEL_AGENT_SEED="3")
    base = [TRACEPASS, "probe", "--references", REFS, "--format", "json", "--no-progress"]
    args = ["--agent", f"{TRAVEL_AGENT}:answer", "--trials", "3", "--k", "1,3"]
    failed = subprocess.run(
        [*base, *args, "--fail-under", "pass_pow_k@3=0.99"],
        capture_output=True, text=True, env=env, timeout=240,
    )  # fmt: skip
    assert failed.returncode == 1, failed.stderr
    doc = json.loads(failed.stdout)
    assert doc["gates"][0]["passed"] is False
    assert "gate FAIL: pass_pow_k@3" in failed.stderr
    passed = subprocess.run(
        [*base, *args, "--fail-under", "pass_at_k@1=0.01"],
        capture_output=True, text=True, env=env, timeout=240,
    )  # fmt: skip
    assert passed.returncode == 0, passed.stderr
    bad = subprocess.run(
        [*base, *args, "--fail-under", "pass_pow_k@7=0.5"],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert bad.returncode == 2
    assert "pass_pow_k@7" in bad.stderr


def test_probe_table_shows_the_intervals_its_title_promises() -> None:
    import re

    done = subprocess.run(
        [TRACEPASS, "probe", "--references", REFS, "--no-progress",
         "--agent", f"{TRAVEL_AGENT}:answer", "--trials", "2", "--k", "1,2"],
        capture_output=True, text=True, env=clean_env(), timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "credible interval" in done.stdout
    rows = [line for line in done.stdout.splitlines() if "greeting" in line]
    assert rows
    assert re.search(r"\d\.\d\d \[\d\.\d\d, \d\.\d\d\]", rows[0])


def test_probe_readiness_is_said_on_lower_bounds_like_evaluate() -> None:
    """probe's readiness line is the readiness rule on its pooled pass^3 interval, in
    the sentence `evaluate` prints for the same numbers (one rule, one wording):
    "production ready" only when the lower bound clears the target."""
    from tracepass.evaluator.offline.evaluation_run import readiness_line
    from tracepass.evaluator.stats.readiness import ReadinessRule

    done = subprocess.run(
        [TRACEPASS, "probe", "--references", REFS, "--no-progress",
         "--agent", f"{TRAVEL_AGENT}:answer", "--trials", "5", "--format", "json"],
        capture_output=True, text=True, env=clean_env(), timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)["summary"]
    verdict = summary["readiness"]
    assert (verdict["k"], verdict["target"]) == (3, 0.7)
    assert (verdict["lower"], verdict["upper"]) == (
        summary["pass_pow_k"]["3"]["lower"],
        summary["pass_pow_k"]["3"]["upper"],
    )
    assert verdict["tier"] == ReadinessRule().classify(verdict["lower"], verdict["upper"])
    assert (verdict["tier"] == "production_ready") == (verdict["lower"] > 0.7)
    table = subprocess.run(
        [TRACEPASS, "probe", "--references", REFS, "--no-progress",
         "--agent", f"{TRAVEL_AGENT}:answer", "--trials", "5"],
        capture_output=True, text=True, env=clean_env(COLUMNS="200"), timeout=240,
    )  # fmt: skip
    assert table.returncode == 0, table.stderr
    line = next(x for x in table.stdout.splitlines() if x.startswith("readiness: "))
    assert line == readiness_line(verdict)
    assert line.startswith(f"readiness: {verdict['tier'].replace('_', ' ')} (pass^3 95% interval [")
