"""Conversation judges end to end (issue 23, "Done when"): a real `tracepass serve`,
real OTLP/HTTP from the real SDK (`tracepass.instrumentation` decorators), and a
scripted langchain-core chat model as the judge (the only fake part).

The judge's prompt for each 3-turn conversation holds every turn's query, each tool
call with its arguments and result, and the answers; the verdicts reach the
conversation API, the UI page (escaped) and a `judge:goal_completion` pass^k series on
`/metrics`; the judge's priced spend is counted, and `usd_per_day` stops judging once it
is spent (`skipped_budget`, never a failure)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _live_support import FAST_CONFIG, Serve, clean_env, http_get, scrape, serve, total, wait_until

from tracepass.evaluator.pricing import PriceBook, TokenUsage

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
AGENT = HERE / "_judged_agent.py"
SERIES = "judge:goal_completion"


def _run_agent(s: Serve, first: int, count: int) -> None:
    done = subprocess.run(
        [sys.executable, str(AGENT), s.http, str(first), str(count)],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


def _view(s: Serve, cid: str) -> dict[str, Any] | None:
    status, body = http_get(f"{s.http}/api/v1/conversations/{cid}")
    if status != 200:
        return None
    view: dict[str, Any] = json.loads(body)
    return view if view.get("status") == "evaluated" else None


def _prompts(log: Path) -> list[str]:
    if not log.exists():
        return []
    return [json.loads(line)["prompt"] for line in log.read_text().splitlines() if line]


def test_conversation_judge_end_to_end(tmp_path: Path) -> None:
    import _scripted_conversation_judge as scripted

    per_call = PriceBook().cost_usd(
        scripted.MODEL, TokenUsage(scripted.INPUT_TOKENS, scripted.OUTPUT_TOKENS)
    )
    assert per_call is not None
    assert per_call > 0
    # Six calls fit; the seventh would cross the cap (its cost is reserved before it
    # starts), so it is refused.
    usd_per_day = 6.5 * per_call
    log = tmp_path / "judge.log"
    config: dict[str, Any] = {
        **FAST_CONFIG,
        "evaluation": {
            "judge": "_scripted_conversation_judge:model",
            "judge_budget": {"usd_per_day": usd_per_day},
            "conversation_judges": [
                {"name": "goal_completion", "rubric": "goal_completion", "pass_threshold": 0.7}
            ],
        },
    }
    env = {"PYTHONPATH": str(HERE), "TRACEPASS_TEST_JUDGE_LOG": str(log)}
    with serve(tmp_path, config=config, env=env) as s:
        _run_agent(s, 0, 5)
        views = {
            n: wait_until(lambda n=n: _view(s, f"judged-{n}"), 120, f"conversation {n}")
            for n in range(5)
        }

        # The prompt: every turn's query, each tool call with arguments and result, answers.
        prompts = _prompts(log)
        assert len(prompts) == 5
        for n in range(5):
            (prompt,) = [p for p in prompts if f"What is the weather in Town{n}?" in p]
            view = views[n]
            assert len(view["turns"]) == 3
            assert prompt.count("<conversation>\n") == 1
            assert prompt.count("\n</conversation>") == 1
            for turn in view["turns"]:
                assert turn["query"] in prompt
                assert turn["answer"] in prompt
                (call,) = turn["tool_calls"]
                assert f"Tool call 1: {call['name']}" in prompt
                assert "arguments: " + json.dumps(call["arguments"], ensure_ascii=False) in prompt
                assert "result: " + json.dumps(call["result"], ensure_ascii=False) in prompt
            assert f'"city": "Town{n}"' in prompt

        # The API: the contract's judgement fields.
        (j,) = views[0]["judgements"]
        assert j["name"] == "goal_completion"
        assert j["passed"] is True
        assert j["score"] == 0.9
        assert j["reasoning"] == scripted.REASONING
        assert j["rubric_version"] == "tracepass-goal_completion-v1"
        assert j["model"] == "scripted-conversation-judge"
        assert views[0]["evaluation"]["judgements"][0]["outcome"] == "pass"

        # The UI page shows it, escaped.
        status, page = http_get(f"{s.http}/ui/conversations/judged-0")
        assert status == 200
        html = page.decode()
        assert 'id="judgements"' in html
        assert "goal_completion" in html
        assert "tracepass-goal_completion-v1" in html
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
        assert "<script>alert(1)" not in html

        # /metrics: the judge's own series, with pass^k, and its priced spend.
        def series_ready() -> list[Any] | None:
            samples = scrape(s.metrics_url)
            found = [
                x
                for x in samples
                if x[0] == "tracepass_pass_pow_k"
                and x[1].get("reference_set") == SERIES
                and x[1].get("k") == "3"
                and x[1].get("estimator") == "plugin"
            ]
            return found or None

        (pow3,) = wait_until(series_ready, 60, "the judge:goal_completion pass^k series")
        assert pow3[2] == pytest.approx(1.0)
        samples = scrape(s.metrics_url)
        assert (
            total(samples, "tracepass_conversations_total", reference_set=SERIES, outcome="pass")
            == 5
        )
        assert total(samples, "tracepass_judge_cost_usd_total") == pytest.approx(5 * per_call)
        assert (
            total(samples, "tracepass_judge_tokens_total", type="input")
            == 5 * scripted.INPUT_TOKENS
        )

        # usd_per_day: one at a time, the sixth call fits, the seventh would cross the cap.
        for n in (5, 6):
            _run_agent(s, n, 1)
            wait_until(lambda n=n: _view(s, f"judged-{n}"), 120, f"conversation {n}")
        sixth, seventh = _view(s, "judged-5"), _view(s, "judged-6")
        assert sixth is not None
        assert seventh is not None
        assert sixth["judgements"][0]["outcome"] == "pass"
        (refused,) = seventh["judgements"]
        assert refused["outcome"] == "skipped_budget"
        assert refused["passed"] is None
        assert refused["score"] is None
        assert len(_prompts(log)) == 6
        samples = scrape(s.metrics_url)
        assert (
            total(
                samples,
                "tracepass_conversations_total",
                reference_set=SERIES,
                outcome="skipped_budget",
            )
            == 1
        )
        assert (
            total(samples, "tracepass_conversations_total", reference_set=SERIES, outcome="fail")
            == 0
        )
        assert total(samples, "tracepass_judge_cost_usd_total") == pytest.approx(6 * per_call)
        assert total(
            samples, "tracepass_judge_budget_remaining", period="usd_day"
        ) == pytest.approx(0.5 * per_call)
        assert s.terminate() == 0
