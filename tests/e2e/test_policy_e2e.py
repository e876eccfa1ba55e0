"""Reference-free evaluation end to end (issue 11, "done when"): a real `tracepass serve`
fed over real OTLP/HTTP by an agent instrumented with tracepass's own decorators, and the
same spans evaluated offline by `tracepass evaluate`.

Four conversations of one agent that matches no reference, under an agent policy whose
tools are learned from the spans: calling an unoffered tool, schema-violating
arguments, booking before searching, and a clean one → fail, fail, fail, pass, with the
violations named in the conversation API and in the JSON output, and the policy's
pass@k / pass^k series on /metrics.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _live_support import (
    FAST_CONFIG,
    TRACEPASS,
    clean_env,
    http_get,
    scrape,
    select,
    serve,
    total,
    wait_until,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

AGENT_SCRIPT = Path(__file__).with_name("_policy_agent.py")
POLICY = """\
name: travel-policies
policies:
  - id: travel-agent-policy
    agent: policy-travel-*
    version: "1.*"
    rules:
      - {type: order, first: search_flights, then: book_flight}
      - {type: forbidden_tool, name: delete_account}
      - {type: max_tool_calls, per_turn: 8}
    graders:
      - {type: regex, pattern: "Traceback", must_match: false}
"""
SET = "policy:travel-agent-policy"
EXPECTED: dict[str, tuple[str, list[tuple[str, int, int | None]]]] = {
    "unoffered": ("fail", [("unknown_tool", 0, 1)]),
    "badargs": ("fail", [("arguments_schema", 0, 1)]),
    "early": ("fail", [("order", 0, 0)]),
    "clean": ("pass", []),
}


def _violations(evaluation: dict[str, Any]) -> list[tuple[str, int, int | None]]:
    return [(v["rule"], v["turn"], v["tool_call"]) for v in evaluation["violations"]]


def test_policy_live_and_offline(tmp_path: Path) -> None:
    refs = tmp_path / "refs"
    refs.mkdir()
    (refs / "policy.yaml").write_text(POLICY, encoding="utf-8")
    config = {**FAST_CONFIG, "metrics": {**FAST_CONFIG["metrics"], "min_conversations": 1}}
    spans = tmp_path / "spans.binpb"
    with serve(tmp_path, "--references", str(refs), config=config) as s:
        done = subprocess.run(
            [sys.executable, str(AGENT_SCRIPT), s.http, "--out", str(spans)],
            capture_output=True,
            text=True,
            env=clean_env(),
            timeout=120,
        )
        assert done.returncode == 0, done.stderr

        def all_evaluated() -> list[Any] | None:
            samples = scrape(s.metrics_url)
            n = total(samples, "tracepass_conversations_total", reference_set=SET)
            return samples if n >= len(EXPECTED) else None

        samples = wait_until(all_evaluated, 120, "the four policy conversations")
        # ---- the conversation API names each violation
        for cid, (outcome, violations) in EXPECTED.items():
            status, body = http_get(f"{s.http}/api/v1/conversations/{cid}")
            assert status == 200, body
            evaluation = json.loads(body)["evaluation"]
            assert evaluation["outcome"] == outcome, (cid, evaluation)
            assert evaluation["reference_set"] == SET
            assert evaluation["policy_id"] == "travel-agent-policy"
            assert _violations(evaluation) == violations, cid
            assert _violations(evaluation["turns"][0]) == violations
        badargs = json.loads(http_get(f"{s.http}/api/v1/conversations/badargs")[1])
        (v,) = badargs["evaluation"]["violations"]
        assert v["path"] == "$.passengers"
        assert v["message"] == "book_flight: $.passengers: 'two' is not of type 'integer'"
        # ---- /metrics: outcome counters, violations by rule, the policy's own series
        base = {"agent_name": "policy-travel-agent", "agent_version": "1.0", "reference_set": SET}
        assert total(samples, "tracepass_conversations_total", outcome="pass", **base) == 1
        assert total(samples, "tracepass_conversations_total", outcome="fail", **base) == 3
        for rule in ("unknown_tool", "arguments_schema", "order"):
            assert total(samples, "tracepass_policy_violations_total", rule=rule, **base) == 1
        assert total(samples, "tracepass_window_conversations", window="5m", **base) == 4
        assert total(samples, "tracepass_window_successes", window="5m", **base) == 1
        (pow1,) = select(
            samples, "tracepass_pass_pow_k", k="1", estimator="plugin", window="5m", **base
        )
        assert pow1[2] == pytest.approx(0.25)
        assert select(samples, "tracepass_pass_pow_k", k="3", estimator="bayes", **base)
        assert s.terminate() == 0

    # ---- offline: the same spans through `tracepass evaluate`
    res = subprocess.run(
        [TRACEPASS, "evaluate", str(spans), "--references", str(refs), "--format", "json",
         "--k", "1", "--no-readiness-gate"],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=120,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    by_id = {c["conversation_id"]: c for c in doc["conversations"]}
    assert set(by_id) == set(EXPECTED)
    for cid, (outcome, violations) in EXPECTED.items():
        conv = by_id[cid]
        assert conv["outcome"] == outcome
        assert conv["reference_set"] == SET
        assert _violations(conv["turns"][0]) == violations, cid
    summary = doc["summary"]
    assert (summary["matched"], summary["policy_scored"], summary["unmatched"]) == (4, 4, 0)
    assert summary["violations"] == {"arguments_schema": 1, "order": 1, "unknown_tool": 1}
    assert summary["pass_pow_k"]["1"]["plugin"] == pytest.approx(0.25)
