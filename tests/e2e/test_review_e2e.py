"""The live review queue against a real `tracepass serve` fed over real OTLP by the
scripted triage agent, with a real LLM judge whose model is scripted (always "pass").

`review.rules` queue every failing conversation and a deterministic half of the rest
(the sampling contract on the conversation id, under `review.seed`); a person queues
one more and labels two through the API with the write token; the agreement endpoint
reports Cohen's kappa per judge; write requests without the token or from another
origin are refused; `tracepass review export --state` writes the labels in the
export's columns and `review import` reads the same kappa back.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from _live_support import FAST_CONFIG, TRACEPASS, clean_env, http_get, serve, wait_until

from tracepass.evaluator.stats.conversation_sampling import keep_conversation

pytestmark = [pytest.mark.slow, pytest.mark.system, pytest.mark.timeout(600)]

HERE = Path(__file__).parent
AGENT_SCRIPT = HERE / "_triage_agent.py"
WRITE_TOKEN = "review-token"
REFERENCE = """
name: review-flights
references:
  - id: oslo-rome
    turns:
      - query: Find flights from Oslo to Rome on 2025-07-01
        expected_answer: The cheapest is DY1870.
        graders: [{type: contains, keywords: [DY1870]}, {type: llm}]
        expected_tools:
          - {name: search_flights, arguments: {origin: Oslo, destination: Rome, date: "2025-07-01"}}
          - {name: pick_seat, arguments: {flight: DY1870, side: aisle}}
"""
OK = [f"r-flight-ok-{i}" for i in range(12)]
FAILING = [f"r-flight-date-{i}" for i in range(4)]


def review_config(tmp_path: Path, write_token: str | None = WRITE_TOKEN) -> dict[str, Any]:
    config: dict[str, Any] = {
        **FAST_CONFIG,
        "evaluation": {"judge": "_counting_judge:model"},
        "review": {"rules": [{"when": "failing"}, {"when": "sampled", "rate": 0.5}]},
    }
    if write_token is not None:
        config["api"] = {"write_token": write_token}
    return config


def judge_env(tmp_path: Path) -> dict[str, str]:
    return {"PYTHONPATH": str(HERE), "TRACEPASS_TEST_JUDGE_LOG": str(tmp_path / "judge.log")}


def run_agent(endpoint: str, plan: str, prefix: str) -> None:
    done = subprocess.run(
        [sys.executable, str(AGENT_SCRIPT), endpoint, "--plan", plan, "--prefix", prefix],
        capture_output=True, text=True, env=clean_env(), timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


def post(
    url: str, body: Any = None, *, token: str | None = WRITE_TOKEN, origin: str | None = None
) -> tuple[int, dict[str, Any]]:
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    if origin is not None:
        headers["Origin"] = origin
    data = json.dumps(body if body is not None else {}).encode()
    request = urllib.request.Request(url, data=data, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            return int(r.status), json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return int(exc.code), json.loads(exc.read() or b"{}")


def get_json(url: str) -> dict[str, Any]:
    status, body = http_get(url, timeout=30)
    assert status == 200, body
    data: dict[str, Any] = json.loads(body)
    return data


def evaluated(base: str, ids: list[str]) -> bool:
    for cid in ids:
        status, body = http_get(f"{base}/api/v1/conversations/{cid}", timeout=30)
        if status != 200 or json.loads(body).get("evaluation") is None:
            return False
    return True


def write_refs(tmp_path: Path) -> Path:
    refs = tmp_path / "refs"
    refs.mkdir(exist_ok=True)
    (refs / "flights.yaml").write_text(REFERENCE, encoding="utf-8")
    return refs


def test_rules_labels_agreement_and_export(tmp_path: Path) -> None:
    refs = write_refs(tmp_path)
    config = review_config(tmp_path)
    with serve(tmp_path, "--references", str(refs), config=config, env=judge_env(tmp_path)) as s:
        run_agent(s.http, "flight-ok:12,flight-date:4", "r-")
        wait_until(lambda: evaluated(s.http, OK + FAILING), 240, "16 evaluated conversations")

        # The rules: every failing conversation, and the sampled half of the others —
        # the same ones the sampling contract picks from the ids alone.
        sampled = [c for c in OK if keep_conversation(c, 0.5, "review")]
        assert 0 < len(sampled) < len(OK)
        expected = {c: "failing" for c in FAILING} | {c: "sampled" for c in sampled}

        def queued() -> dict[str, str] | None:
            body = get_json(f"{s.http}/api/v1/review/queue?limit=100")
            found = {i["conversation_id"]: i["reason"] for i in body["items"]}
            return found if len(found) >= len(expected) else None

        assert wait_until(queued, 120, "the queued conversations") == expected

        # Writes need the write token, from the same origin.
        manual = next(c for c in OK if c not in expected)
        url = f"{s.http}/api/v1/conversations/{manual}/review"
        assert post(url, token=None)[0] == 401
        assert post(url, token="wrong")[0] == 401
        status, body = post(url, origin="http://evil.example")
        assert status == 403
        assert "cross-origin" in body["error"]
        assert post(url)[0] == 201
        assert post(url)[0] == 200  # already queued
        assert post(f"{s.http}/api/v1/conversations/nope/review")[0] == 404

        # Labels: a person agrees with tracepass on both; the judge passed both turns.
        label = f"{s.http}/api/v1/review/{{}}/label"
        status, body = post(label.format(manual), {"passed": "pass", "turns": {"0": "pass"}})
        assert status == 200, body
        assert body["label"]["turns"] == {"0": True}
        ok_body = {"passed": False, "turns": {"0": "fail"}, "comment": "wrong date"}
        assert post(label.format(FAILING[0]), ok_body)[0] == 200
        assert post(label.format(FAILING[1]), {"turns": {"5": "pass"}})[0] == 400
        assert post(label.format(FAILING[1]), {"passed": "maybe"})[0] == 400
        assert post(label.format(FAILING[1]), {})[0] == 400
        assert post(label.format(FAILING[1]), {"passed": "fail"}, token=None)[0] == 401

        queue = get_json(f"{s.http}/api/v1/review/queue?limit=100")
        assert queue["labelled"] == 2
        assert queue["pending"] == len(expected) - 1  # the manual one came and went
        assert FAILING[0] not in {i["conversation_id"] for i in queue["items"]}

        agreement = get_json(f"{s.http}/api/v1/review/agreement")
        judges = {(j["judge"], j["level"]): j for j in agreement["judges"]}
        assert agreement["labelled"] == 2
        assert judges[("outcome", "conversation")]["kappa"] == 1.0
        turn = judges[("llm", "turn")]
        # The scripted judge passes everything: no agreement beyond chance.
        assert turn["n"] == 2
        assert turn["kappa"] == 0.0
        assert turn["matrix"] == {"tp": 1, "fp": 1, "fn": 0, "tn": 0}
        labels = get_json(f"{s.http}/api/v1/review/labels")["labels"]
        assert [x["comment"] for x in labels] == ["", "wrong date"]
        s.terminate()

    # The labels in the export's columns, readable by `review import`.
    out = tmp_path / "labelled.csv"
    done = subprocess.run(
        [TRACEPASS, "review", "export", "--state", str(tmp_path / "state.sqlite"), "-o", str(out)],
        capture_output=True, text=True, env=clean_env(), timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    with out.open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [(r["conversation_id"], r["judge_passed"], r["human_label"]) for r in rows] == [
        (manual, "True", "pass"),
        (FAILING[0], "True", "fail"),
    ]
    done = subprocess.run(
        [TRACEPASS, "review", "import", str(out), "--format", "json"],
        capture_output=True, text=True, env=clean_env(), timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["kappa"] == turn["kappa"]


def test_write_routes_are_off_without_a_write_token(tmp_path: Path) -> None:
    refs = write_refs(tmp_path)
    config = review_config(tmp_path, write_token=None)
    with serve(tmp_path, "--references", str(refs), config=config, env=judge_env(tmp_path)) as s:
        run_agent(s.http, "flight-date:1", "w-")
        wait_until(lambda: evaluated(s.http, ["w-flight-date-0"]), 240, "the conversation")
        status, body = post(f"{s.http}/api/v1/conversations/w-flight-date-0/review")
        assert status == 404
        assert "api.write_token" in body["error"]
        status, _ = post(f"{s.http}/api/v1/review/w-flight-date-0/label", {"passed": "fail"})
        assert status == 404
        # The rules still queue; the queue reads.
        wait_until(
            lambda: get_json(f"{s.http}/api/v1/review/queue")["queued"] == 1, 120, "the rule"
        )
        s.terminate()
