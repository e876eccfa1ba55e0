"""Issue 40 item 3: the first alert's links work without configuration. A real
`tracepass serve` derives `tracepass_ui_info{url}` from the address it listens on (and
says so at start-up), and after a restart `tracepass_failure_example` still names the
latest failing conversation's trace (the alert's `example_trace_id` is not `none`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from _live_support import FAST_CONFIG, clean_env, scrape, select, serve, total, wait_until

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
configure(service_name="links-agent", endpoint=sys.argv[1], protocol="http/protobuf")

@agent(name="weather", version="1")
def answer(query: str) -> str:
    return "It is raining in Paris."

with conversation("wrong-1", reference_id="weather-sf"):
    answer("What's the weather like in San Francisco?")
shutdown()
"""


def test_ui_info_is_derived_and_the_failure_example_survives_a_restart(tmp_path: Path) -> None:
    refs = tmp_path / "refs.yaml"
    refs.write_text(REFS, encoding="utf-8")
    with serve(tmp_path, "--references", str(refs), config=FAST_CONFIG) as s:
        base = f"{s.http}/ui"
        info = wait_until(lambda: select(scrape(s.metrics_url), "tracepass_ui_info"), 60, "ui info")
        assert [x[1]["url"] for x in info] == [base]
        done = subprocess.run(
            [sys.executable, "-c", AGENT, s.http],
            capture_output=True, text=True, timeout=120, env=clean_env(), check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        before = wait_until(
            lambda: select(scrape(s.metrics_url), "tracepass_failure_example"),
            120,
            "the failing conversation exported as the example",
        )
        trace_id = before[0][1]["trace_id"]
        assert len(trace_id) == 32
        assert before[0][1]["conversation_id"] == "wrong-1"
        assert s.terminate() == 0
        assert f"alert links: {base}/ (from derived)" in s.stderr()
    with serve(tmp_path, "--references", str(refs), config=FAST_CONFIG) as s:
        samples = wait_until(
            lambda: select(scrape(s.metrics_url), "tracepass_failure_example"),
            60,
            "the example restored from the state file",
        )
        assert samples[0][1]["trace_id"] == trace_id
        assert samples[0][1]["reference_set"] == "quickstart"
        assert total(scrape(s.metrics_url), "tracepass_ui_info") == 1


def test_ui_info_is_exported_relative_without_a_ui(tmp_path: Path) -> None:
    config = {**FAST_CONFIG, "ui": {"enabled": False}}
    with serve(tmp_path, config=config) as s:
        info = wait_until(lambda: select(scrape(s.metrics_url), "tracepass_ui_info"), 60, "ui info")
        assert [x[1]["url"] for x in info] == ["/ui"]
