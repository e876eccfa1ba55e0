"""Issue 21 #1/#2: the seeded fuzz of span-declared tool schemas against a real
`tracepass serve`. Hostile `$ref`s, backtracking patterns, huge `uniqueItems`, nesting
and sizes beyond the bounds and exponential `$ref` graphs, mixed with ordinary schemas:
every conversation is evaluated (none lost to an evaluation error), nothing is ever
fetched (the listener the `$ref`s point at accepts no connection), and `/healthz`
answers throughout (validation never holds the event loop)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from _fuzz_schemas import schema_requests
from _serve import Serve, write_config
from test_span_schemas import SilentListener

COUNT = int(os.environ.get("TRACEPASS_FUZZ_SCHEMAS", "120"))  # `make reliability`: 2000
SEED = int(os.environ.get("TRACEPASS_FUZZ_SEED", "13"))

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300 + COUNT)]


def _total(serve: Serve, family: str) -> float:
    return sum(v for (name, _), v in serve.samples().items() if name == family)


def test_fuzzed_span_schemas(tmp_path: Path) -> None:
    listener = SilentListener()
    serve = Serve(write_config(tmp_path, tmp_path / "state.db"))
    try:
        calls = 0
        for request, n_calls in schema_requests(SEED, COUNT, listener.port):
            status, body = serve.request("POST", "/v1/traces", request.SerializeToString())
            assert status == 200, body[:300]
            assert serve.request("GET", "/healthz")[0] == 200
            calls += n_calls
        deadline = time.monotonic() + 120 + COUNT
        while _total(serve, "tracepass_conversations_total") < COUNT:
            assert serve.proc.poll() is None, "the collector exited"
            assert serve.request("GET", "/healthz")[0] == 200
            assert time.monotonic() < deadline, "not every conversation was evaluated"
            time.sleep(0.5)
        assert _total(serve, "tracepass_evaluation_errors_total") == 0
        unknown = {
            labels: v
            for (name, labels), v in serve.samples().items()
            if name == "tracepass_schema_checks_unknown_total" and v
        }
        assert unknown, "no schema was refused: the generator lost its hostile inputs"
        print(f"schema fuzz seed {SEED}: {COUNT} conversations, {calls} calls; unknown {unknown}")
    finally:
        serve.stop()
        listener.close()
    assert listener.accepted == 0
