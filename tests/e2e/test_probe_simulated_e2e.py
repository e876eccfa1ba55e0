"""`tracepass probe --user-simulator`: references with a `user:` scenario played turn by
turn by a simulated user against the example agent (module, `cmd:` and HTTP targets),
each trial a real conversation through the collector; pass^k over K trials, simulator
faults counted apart with their share, the simulator recorded, and a resume with a
different simulator refused (issue 38, item 1). Plus the chat-model simulator driven
by a langchain-core fake model, and the precise refusals."""

from __future__ import annotations

import json
import math
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _live_support import FAST_CONFIG, REPO, TRACEPASS, TRAVEL_AGENT, clean_env, serve

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]

REFS = str(REPO / "examples" / "simulated")
USER = f"{REPO / 'examples' / 'simulated' / 'user.py'}:user"
CARELESS = f"{REPO / 'examples' / 'simulated' / 'user.py'}:careless_user"


def probe(*args: str, env: dict[str, str] | None = None, code: int = 0) -> dict[str, Any]:
    done = subprocess.run(
        [TRACEPASS, "probe", "--references", REFS, "--format", "json", "--no-progress",
         "--no-readiness-gate", *args],
        capture_output=True, text=True, env=env or clean_env(), timeout=300,
    )  # fmt: skip
    assert done.returncode == code, done.stderr
    if code != 0:
        return {"stderr": done.stderr}
    doc: dict[str, Any] = json.loads(done.stdout)
    return doc


def test_scripted_user_module_target_pass_pow_k_and_recorded_simulator() -> None:
    doc = probe("--agent", f"{TRAVEL_AGENT}:answer", "--trials", "3", "--user-simulator", USER)
    sim = doc["run"]["simulator"]
    assert sim["model"] == "scripted-user"
    assert sim["prompt_version"] == "examples/simulated/user.py 1"
    assert sim["spec"] == USER
    assert len(doc["trials"]) == 6
    for t in doc["trials"]:
        assert t["outcome"] == "pass", (t["reference_id"], t["error"], t["simulation"])
        assert t["simulation"]["ended_by"] == "user_stop"
        assert t["simulation"]["audit"] == {"followed": True, "problems": []}
    lisbon = [t for t in doc["trials"] if t["reference_id"] == "sim-book-lisbon"]
    # The user reacted to the agent: it asked for the route, then offered the cheapest.
    assert lisbon[0]["simulation"]["user_messages"] == [
        "Hi, I need a flight.",
        "A flight from Paris to Lisbon on 2025-06-12, please.",
        "Book the cheapest one.",
    ]
    assert len(lisbon[0]["answers"]) == 3
    # Scored as one folded turn: both expected tools over the whole conversation.
    (turn,) = lisbon[0]["evaluation"]["turns"]
    assert turn["tool_correctness"]["overall"] == 1.0
    assert doc["summary"]["simulator_faults"] == {"count": 0, "of": 6, "share": 0.0}
    assert doc["summary"]["pass_pow_k"]["3"]["unbiased"] == 1.0


def test_regressed_agent_fails_and_straying_user_is_a_simulator_fault() -> None:
    env = clean_env(TRAVEL_AGENT_REGRESSION="0.5", TRAVEL_AGENT_SEED="3")
    doc = probe(
        "--agent", f"{TRAVEL_AGENT}:answer", "--trials", "4", "--k", "1,2,4",
        "--user-simulator", CARELESS, env=env,
    )  # fmt: skip
    by_ref: dict[str, list[dict[str, Any]]] = {}
    for t in doc["trials"]:
        by_ref.setdefault(t["reference_id"], []).append(t)
    # The careless user never gave the date: every Lisbon trial is the simulator's
    # fault, listed under not_counted, never a failure of the agent.
    for t in by_ref["sim-book-lisbon"]:
        assert t["outcome"] == "simulator_fault"
        assert t["simulation"]["ended_by"] == "user_stop"  # gave up, date never given
        assert "2025-06-12" in t["error"]
    rows = {r["reference_id"]: r for r in doc["references"]}
    assert rows["sim-book-lisbon"]["not_counted"] == {"simulator_fault": 4}
    assert rows["sim-book-lisbon"]["trials"] == 0
    assert doc["summary"]["simulator_faults"] == {"count": 4, "of": 8, "share": 0.5}
    # The weather user behaved; the regressed agent is judged on those trials alone.
    weather = by_ref["sim-weather-fahrenheit"]
    assert all(t["outcome"] in ("pass", "fail") for t in weather)
    n, c = len(weather), sum(t["correct"] for t in weather)
    assert rows["sim-weather-fahrenheit"]["trials"] == n
    for k in (1, 2, 4):
        got = rows["sim-weather-fahrenheit"]["pass_pow_k"][str(k)]["unbiased"]
        assert got == pytest.approx(math.comb(c, k) / math.comb(n, k))
    assert doc["summary"]["trials"] == n


def test_cmd_and_http_targets_play_the_simulated_user(tmp_path: Path) -> None:
    doc = probe(
        "--agent", f"cmd:{sys.executable} {TRAVEL_AGENT} stdio", "--trials", "2",
        "--concurrency", "2", "--user-simulator", USER,
    )  # fmt: skip
    assert [t["outcome"] for t in doc["trials"]] == ["pass"] * 4, doc["trials"]
    with serve(tmp_path, "--references", REFS, config=FAST_CONFIG) as s:
        agent = subprocess.Popen(
            [sys.executable, str(TRAVEL_AGENT), "--endpoint", s.http, "serve-http",
             "--port", "0"],
            stdout=subprocess.PIPE, text=True, env=clean_env(),
        )  # fmt: skip
        try:
            assert agent.stdout is not None
            url = json.loads(agent.stdout.readline())["listening"]
            doc = probe(
                "--agent", url, "--trials", "2", "--collector", s.http,
                "--user-simulator", USER,
            )  # fmt: skip
        finally:
            agent.send_signal(signal.SIGINT)
            try:
                agent.wait(timeout=120)
            except subprocess.TimeoutExpired:
                agent.kill()
                agent.wait(timeout=60)
        assert s.terminate() == 0
    assert [t["outcome"] for t in doc["trials"]] == ["pass"] * 4, doc["trials"]
    lisbon = next(t for t in doc["trials"] if t["reference_id"] == "sim-book-lisbon")
    assert lisbon["simulation"]["ended_by"] == "user_stop"
    assert "Booked TP433" in lisbon["answers"][-1]


def test_resume_with_another_simulator_and_missing_simulator_are_refused(tmp_path: Path) -> None:
    ckpt = tmp_path / "probe.ckpt"
    probe(
        "--agent", f"{TRAVEL_AGENT}:answer", "--trials", "1", "--user-simulator", USER,
        "--checkpoint", str(ckpt),
    )  # fmt: skip
    header = json.loads(ckpt.read_text().splitlines()[0])
    assert header["simulator"]["model"] == "scripted-user"
    out = probe(
        "--agent", f"{TRAVEL_AGENT}:answer", "--trials", "1", "--user-simulator", CARELESS,
        "--checkpoint", str(ckpt), "--resume", code=2,
    )  # fmt: skip
    assert "same --user-simulator" in out["stderr"]
    out = probe("--agent", f"{TRAVEL_AGENT}:answer", "--trials", "1", code=2)
    assert "sim-book-lisbon" in out["stderr"]
    assert "--user-simulator" in out["stderr"]
    out = probe(
        "--agent", f"{TRAVEL_AGENT}:answer", "--user-simulator", "nosuchmod_xyz:user", code=2
    )
    assert "cannot import 'nosuchmod_xyz'" in out["stderr"]


CHAT_USER = """
from langchain_core.language_models.fake_chat_models import FakeListChatModel

def make():
    return FakeListChatModel(responses=[
        "A flight from Paris to Lisbon on 2025-06-12, please.",
        "Book the cheapest one.",
        "###STOP###",
    ])
"""


def test_chat_model_simulator_is_recorded_and_plays(tmp_path: Path) -> None:
    """A langchain-core chat model factory as the simulator (the fake model stands in
    for a real one; its prompt is tracepass's, PROMPT_VERSION recorded)."""
    (tmp_path / "chat_user.py").write_text(CHAT_USER, encoding="utf-8")
    refs = tmp_path / "refs.yaml"
    text = (REPO / "examples" / "simulated" / "references.yaml").read_text(encoding="utf-8")
    refs.write_text(text.split("  - id: sim-weather-fahrenheit")[0], encoding="utf-8")
    done = subprocess.run(
        [TRACEPASS, "probe", "--references", str(refs), "--format", "json", "--no-progress",
         "--no-readiness-gate", "--agent", f"{TRAVEL_AGENT}:answer", "--trials", "1",
         "--concurrency", "1", "--user-simulator", f"{tmp_path / 'chat_user.py'}:make"],
        capture_output=True, text=True, env=clean_env(), timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    sim = doc["run"]["simulator"]
    assert sim["kind"] == "chat_model"
    assert sim["prompt_version"] == "tracepass-user-simulator/1"
    assert sim["model"]
    (t,) = doc["trials"]
    # The fake model's first line answered the agent's greeting-question, etc.
    assert t["simulation"]["ended_by"] == "user_stop", t
    assert t["outcome"] in ("pass", "fail")
