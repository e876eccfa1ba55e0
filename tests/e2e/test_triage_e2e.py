"""Failure modes and reference candidates end to end: a real `tracepass serve` fed over
real OTLP/HTTP by a scripted agent instrumented with tracepass's decorators.

* 300 unreferenced conversations over 4 tasks, one handled inconsistently → exactly the
  3 consistent tasks are proposed, with the arguments that agreed (a random argument
  left out);
* write access: refused without the write token, with the read-only one, and
  cross-origin; approving through the API writes one file (twice → still one) that
  `tracepass references validate` accepts; an invalid edit is a 400 with file:line and
  writes nothing;
* the next conversations of the approved task are scored against it: their own pass^k
  series on /metrics;
* injected faults (two wrong-argument kinds, one missing tool, one wrong answer) are the
  top failure modes with the right counts, the one only 1.1 has marked new;
* `failure_modes.summarize`: the wrong-answer mode gets its summary from the judge model
  (the repository's scripted judge, `examples/scripted_judge.py`), the argument modes
  none (no free text).
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import pytest
from _live_support import FAST_CONFIG, TRACEPASS, clean_env, http_get, scrape, select, serve
from _live_support import wait_until as _wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

AGENT_SCRIPT = Path(__file__).with_name("_triage_agent.py")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
WRITE_TOKEN = "approve-me"
REFERENCE = """
name: triage-flights
version: "1"
references:
  - id: oslo-rome
    turns:
      - query: Find flights from Oslo to Rome on 2025-07-01
        graders: [{type: contains, keywords: [DY1870]}]
        expected_tools:
          - name: search_flights
            arguments: {origin: Oslo, destination: Rome, date: "2025-07-01"}
          - name: pick_seat
            arguments: {flight: DY1870, side: aisle}
"""
CONSISTENT = {
    "What's the weather in Bergen?": ["get_weather"],
    "Convert 100 EUR to NOK": ["convert_currency"],
    "Find me a cheap hotel in Porto": ["search_hotels", "rank"],
}
FAULTS_10 = "flight-ok:10,flight-date:6,flight-noseat:4,flight-answer:3"
FAULTS_11 = FAULTS_10 + ",flight-side:8"


def wait_until(fn: Any, timeout: float, what: str) -> Any:
    return _wait_until(fn, timeout, what, interval=0.5)


def _agent(endpoint: str, plan: str, *, version: str, prefix: str, seed: int = 1) -> None:
    cmd = [sys.executable, str(AGENT_SCRIPT), endpoint, "--plan", plan, "--version", version]
    cmd += ["--prefix", prefix, "--seed", str(seed)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=clean_env(), timeout=300)
    assert done.returncode == 0, done.stderr


def _get(base: str, path: str, **params: str) -> dict[str, Any]:
    status, body = http_get(f"{base}{path}" + (f"?{urlencode(params)}" if params else ""))
    assert status == 200, body
    return dict(json.loads(body))


def _post(
    url: str, body: dict[str, Any] | None = None, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, Any]]:
    data = json.dumps(body or {}).encode()
    request = urllib.request.Request(url, data=data, method="POST")
    request.add_header("Content-Type", "application/json")
    for k, v in (headers or {}).items():
        request.add_header(k, v)
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def test_candidates_approval_and_failure_modes(tmp_path: Path) -> None:
    refs = tmp_path / "refs"
    refs.mkdir()
    (refs / "flights.yaml").write_text(REFERENCE, encoding="utf-8")
    config = {
        **FAST_CONFIG,
        "matching": {"reload_interval_s": 0.5},
        "api": {"write_token": WRITE_TOKEN},
        "evaluation": {"judge": "scripted_judge:model"},
        "failure_modes": {"summarize": True},
    }
    env = {"PYTHONPATH": str(EXAMPLES)}  # the scripted judge model (only the LLM is scripted)
    with serve(tmp_path, "--references", str(refs), config=config, env=env) as s:
        _agent(s.http, "weather:75,fx:75,hotels:75,dayplan:75", version="1.0", prefix="u-")
        _agent(s.http, FAULTS_10, version="1.0", prefix="a-")

        def failing(version: str, n: int) -> dict[str, Any] | None:
            body = _get(
                s.http, "/api/v1/failure-modes", agent_name="triage-agent", agent_version=version
            )
            return body if body["failing_conversations"] >= n else None

        v10 = wait_until(lambda: failing("1.0", 13), 180, "1.0's 13 failing conversations")
        _agent(s.http, FAULTS_11, version="1.1", prefix="b-", seed=2)

        # ---------------------------------------------------------- candidates
        def proposed() -> list[dict[str, Any]] | None:
            got = _get(s.http, "/api/v1/reference-candidates")["candidates"]
            return got if len(got) >= 3 and all(c["conversations"] == 75 for c in got) else None

        candidates = wait_until(proposed, 180, "3 candidates of 75 conversations")
        assert {c["query"]: c["tools"] for c in candidates} == CONSISTENT
        by_query = {c["query"]: c for c in candidates}
        fx = by_query["Convert 100 EUR to NOK"]
        assert fx["left_out"] == {"convert_currency": ["request_id"]}
        assert fx["agreement"] == 1.0
        assert fx["agent_versions"] == {"1.0": 75}
        assert "amount: 100" in fx["yaml"]
        assert "source: EUR" in fx["yaml"]
        assert "argument_match: subset" in fx["yaml"]
        assert "tool_sequence_matters: true" in by_query["Find me a cheap hotel in Porto"]["yaml"]
        weather = by_query["What's the weather in Bergen?"]
        assert "city: Bergen" in weather["yaml"]
        assert "unit: celsius" in weather["yaml"]
        assert "Bergen" in weather["yaml"].split("keywords:")[1]

        # ---------------------------------------------------------- write access
        approve = f"{s.http}/api/v1/reference-candidates/{quote(weather['id'])}/approve"
        assert _post(approve)[0] == 401
        assert _post(approve, headers={"Authorization": "Bearer wrong"})[0] == 401
        status, body = _post(
            approve,
            headers={"Authorization": f"Bearer {WRITE_TOKEN}", "Origin": "http://evil.example"},
        )
        assert status == 403, body
        bad = "name: x\nreferences:\n  - id: y\n    turns: nope\n"
        status, body = _post(
            approve, {"yaml": bad}, headers={"Authorization": f"Bearer {WRITE_TOKEN}"}
        )
        assert status == 400, body
        assert f"{weather['id']}.yaml:4" in body["error"], body
        assert sorted(p.name for p in refs.iterdir()) == ["flights.yaml"]

        auth = {"Authorization": f"Bearer {WRITE_TOKEN}"}
        status, body = _post(approve, headers=auth)
        assert status == 201, body
        written = Path(body["path"])
        assert written.parent == refs
        assert body["reference_ids"] == [weather["id"]]
        status, again = _post(approve, headers=auth)
        assert status == 200
        assert again["created"] is False
        assert again["path"] == str(written)
        assert sorted(p.name for p in refs.iterdir()) == sorted(["flights.yaml", written.name])
        done = subprocess.run(
            [TRACEPASS, "references", "validate", str(written)],
            capture_output=True,
            text=True,
            env=clean_env(),
            timeout=120,
        )
        assert done.returncode == 0, done.stdout + done.stderr

        # The approved task leaves the proposals; its next conversations are scored.
        left = _get(s.http, "/api/v1/reference-candidates")["candidates"]
        assert weather["id"] not in {c["id"] for c in left}

        rounds = iter(range(1000))

        def referenced() -> list[dict[str, Any]] | None:
            _agent(s.http, "weather:6", version="1.0", prefix=f"after{next(rounds)}-", seed=3)
            rows = _get(s.http, "/api/v1/conversations", reference_id=weather["id"], limit="50")
            return rows["conversations"] or None

        # The watcher reloads within reload_interval_s; conversations sent before that
        # stay unreferenced, so send again until they match.
        scored = wait_until(referenced, 180, "conversations scored against the approved reference")
        # Scored (a trial), in the approved reference's own set.
        assert {c["outcome"] for c in scored} <= {"pass", "fail"}, scored
        assert {c["reference_set"] for c in scored} == {weather["id"]}

        def series() -> list[Any] | None:
            samples = scrape(s.metrics_url)
            found = select(samples, "tracepass_pass_pow_k", reference_set=weather["id"])
            return found or None

        wait_until(series, 180, "pass^k of the approved reference on /metrics")

        # ---------------------------------------------------------- failure modes
        v11 = wait_until(lambda: failing("1.1", 21), 180, "1.1's 21 failing conversations")
        top = [(m["signature"], m["count"], m["new"]) for m in v11["failure_modes"][:4]]
        assert top == [
            ("wrong_argument:pick_seat.side", 8, True),
            ("wrong_argument:search_flights.date", 6, False),
            ("missing_tool:pick_seat", 4, False),
            ("answer:contains", 3, False),
        ]
        assert v11["baseline_version"] == "1.0"
        assert v11["failure_modes"][0]["share"] == pytest.approx(8 / 21)
        assert len(v11["failure_modes"][0]["examples"]) == 3
        assert [(m["signature"], m["count"]) for m in v10["failure_modes"]] == [
            ("wrong_argument:search_flights.date", 6),
            ("missing_tool:pick_seat", 4),
            ("answer:contains", 3),
        ]
        # The failing list filtered to the new mode: exactly its 8 conversations.
        listed = _get(
            s.http,
            "/api/v1/conversations",
            failure_mode="wrong_argument:pick_seat.side",
            agent_version="1.1",
            limit="50",
        )["conversations"]
        assert sorted(c["conversation_id"] for c in listed) == sorted(
            f"b-flight-side-{i}" for i in range(8)
        )

        # ---------------------------------------------------------- summaries
        def summarized() -> dict[str, Any] | None:
            body = _get(s.http, "/api/v1/failure-modes", agent_name="triage-agent",
                        agent_version="1.1")  # fmt: skip
            modes = {m["signature"]: m for m in body["failure_modes"]}
            return modes if modes["answer:contains"]["summary"] else None

        modes = wait_until(summarized, 180, "the wrong-answer mode's summary")
        assert " reasons for answer:contains; most often: " in modes["answer:contains"]["summary"]
        assert modes["wrong_argument:pick_seat.side"]["summary"] is None
        page = http_get(f"{s.http}/ui/failure-modes?agent_name=triage-agent&agent_version=1.1")
        assert page[0] == 200
        assert b"reasons for answer:contains" in page[1]  # under its signature
    assert s.proc.returncode is not None
