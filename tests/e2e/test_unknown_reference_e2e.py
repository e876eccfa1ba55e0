"""A misspelled `reference_id` is not lost silently: `tracepass serve` counts it
(`tracepass_reference_id_unknown_total` on /metrics) and the conversation's page in
the web UI says which id the agent named and how the conversation was matched instead.
A real collector, an instrumented agent exporting over OTLP/HTTP."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from _live_support import FAST_CONFIG, clean_env, http_get, scrape, serve, total, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

REFS = """\
name: quickstart
references:
  - id: weather-sf
    turns:
      - query: What's the weather like in San Francisco?
        expected_answer: It is 18 degrees in San Francisco.
"""
AGENT = """
import sys
from tracepass.instrumentation import agent, configure, conversation, shutdown
configure(service_name="typo-agent", endpoint=sys.argv[1], protocol="http/protobuf")

@agent(name="weather", version="1")
def answer(query: str) -> str:
    return "It is 18 degrees in San Francisco."

with conversation("typo-1", reference_id="wether-sf"):
    answer("What's the weather like in San Francisco?")
with conversation("right-1", reference_id="weather-sf"):
    answer("What's the weather like in San Francisco?")
shutdown()
"""


def test_unknown_reference_id_is_counted_and_shown(tmp_path: Path) -> None:
    refs = tmp_path / "refs.yaml"
    refs.write_text(REFS, encoding="utf-8")
    with serve(tmp_path, "--references", str(refs), config=FAST_CONFIG) as s:
        done = subprocess.run(
            [sys.executable, "-c", AGENT, s.http],
            capture_output=True, text=True, timeout=120, env=clean_env(), check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        wait_until(
            lambda: total(scrape(s.metrics_url), "tracepass_conversations_total") >= 2,
            120,
            "both conversations evaluated",
        )
        assert total(scrape(s.metrics_url), "tracepass_reference_id_unknown_total") == 1
        status, page = http_get(f"{s.http}/ui/conversations/typo-1")
        assert status == 200
        html = page.decode()
        assert "the agent named reference_id wether-sf, which no loaded reference set has" in html
        assert "matched by its query instead" in html
        status, page = http_get(f"{s.http}/ui/conversations/right-1")
        assert status == 200
        assert "unknown-reference" not in page.decode()
        assert "names reference_id 'wether-sf'" in s.stderr()
