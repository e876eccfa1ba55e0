"""Multi-agent steps end to end: the committed OpenAI Agents hand-off corpus (real SDK, real
OpenInference instrumentation, scripted model) POSTed over OTLP/HTTP to a real
`tracepass serve`; the conversation API shows each turn's agent steps and which agent
called each tool, and the UI conversation page, rendered by headless Chromium, shows the
steps nested under the turn (no script: the markup alone)."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from _live_support import FAST_CONFIG, http_get, serve, wait_until
from test_ui_chromium import _render, _text

from conftest import require_tool

pytestmark = [pytest.mark.slow, pytest.mark.system, pytest.mark.timeout(400)]

CORPUS = Path(__file__).resolve().parents[1] / "frameworks" / "corpus"
SCENARIO = CORPUS / "openai_agents_openinference_handoff.otlp.jsonl"
CONVERSATION = "conv-travel-1"


def _post(base: str, body: str) -> None:
    request = urllib.request.Request(
        f"{base}/v1/traces",
        data=body.encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as resp:
        assert resp.status == 200


def _conversation(base: str) -> dict[str, Any] | None:
    status, body = http_get(f"{base}/api/v1/conversations/{CONVERSATION}")
    if status != 200:
        return None
    view = dict(json.loads(body))
    # Evaluated: stored, so the UI page shows it too (pending ones are the API's only).
    return view if view.get("status") == "evaluated" and len(view["turns"]) == 2 else None


def test_hand_off_steps_in_the_api_and_nested_on_the_page(tmp_path: Path) -> None:
    chromium = require_tool("chromium")
    with serve(tmp_path, config=FAST_CONFIG) as s:
        for line in SCENARIO.read_text(encoding="utf-8").splitlines():
            if line.strip():
                _post(s.http, line)
        view = wait_until(lambda: _conversation(s.http), 120, "the conversation in the API")

        first, second = view["turns"]
        assert "steps" not in first  # one agent: no steps, the conversation's agent did it
        assert view["agent"]["name"] == "travel-agent"
        assert [(c["name"], c["agent"]) for c in second["tool_calls"]] == [
            ("search_flights", "booking-agent"),
            ("book_flight", "booking-agent"),
            ("book_flight", "booking-agent"),
        ]
        triage, booking = second["steps"]
        assert (triage["agent"], triage["kind"], triage["tool_calls"]) == (
            "travel-agent",
            "agent",
            [],
        )
        assert (booking["agent"], booking["kind"], booking["tool_calls"]) == (
            "booking-agent",
            "handoff",
            [0, 1, 2],
        )
        assert booking["answer"] == second["answer"]

        dom = _render(
            chromium,
            f"{s.http}/ui/conversations/{CONVERSATION}",
            tmp_path / "ui-multi-agent.png",
            tmp_path / "profile",
        )
        # The second turn's section holds the steps list, each step one list item.
        assert 'id="turn-2"' in dom, _text(dom)[:2000]
        section = dom.split('id="turn-2"', 1)[1]
        steps = section.split('<ul class="steps">', 1)[1].split("</ul>", 1)[0]
        text = _text(steps)
        assert "travel-agent" in text
        assert "booking-agent" in text
        assert "hand-off" in text
        assert "#1 search_flights, #2 book_flight, #3 book_flight" in text
        assert steps.count('<li class="step"') == 2
        assert '<ul class="steps">' not in dom.split('id="turn-2"', 1)[0]  # none in turn 1
