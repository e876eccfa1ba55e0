"""Exemplars end to end: a real Prometheus with exemplar storage scrapes a real
`tracepass serve` fed over OTLP by the example agent, and `/api/v1/query_exemplars`
returns, for the failing series of `tracepass_conversations_total`, the trace id and
conversation id of a conversation that really failed (checked against the list API)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from test_prometheus_e2e import prometheus

from conftest import require_tool

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from _live_support import FAST_CONFIG, http_get, run_agent, serve, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.system, pytest.mark.timeout(300)]

REFS = str(Path(__file__).resolve().parents[2] / "examples" / "references")


def test_failing_series_carry_exemplars_into_prometheus(tmp_path: Path) -> None:
    require_tool("prometheus")
    with (
        serve(tmp_path, "--references", REFS, config=FAST_CONFIG) as s,
        prometheus(
            tmp_path, s.ports["metrics_port"], "--enable-feature=exemplar-storage", rules_file=False
        ) as prom,
    ):
        run_agent(
            s.http, "run", "--conversations", "16", "--version", "1.1",
            "--regression", "0.7", "--prefix", "bad-", "--seed", "7",
        )  # fmt: skip
        start = time.time() - 600

        def failing_exemplars() -> list[dict[str, Any]] | None:
            data = prom.api(
                "/api/v1/query_exemplars",
                query='tracepass_conversations_total{outcome="fail"}',
                start=str(start),
                end=str(time.time() + 60),
            )
            found = [e for series in data for e in series["exemplars"]]
            return found or None

        exemplars = wait_until(failing_exemplars, 90, "exemplars in Prometheus")
        status, body = http_get(f"{s.http}/api/v1/conversations?outcome=fail&limit=500")
        assert status == 200
        failing_traces = {t for c in json.loads(body)["conversations"] for t in c["trace_ids"]}
        for e in exemplars:
            labels = e["labels"]
            # Trace ids only (conversation ids are user data): metrics.exemplar_conversation_ids.
            assert set(labels) == {"trace_id"}
            assert labels["trace_id"] in failing_traces  # a conversation that failed
            assert e["value"] == "1"
