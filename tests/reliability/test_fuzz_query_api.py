"""Issue 21: the seeded fuzz of the read API's and the web UI's query parameters.

A real `tracepass serve` with a few stored conversations gets seeded random query
strings on every read route: known and unknown parameter names, repeated parameters,
values that are empty, long, non-ASCII, control characters, percent-encoding debris,
huge and negative numbers, malformed times and cursors, bidi and zero-width
characters. Whatever the input, the answer is 200, 400, 404, 421 or a retryable
503/504 (never another 5xx), an error answer is JSON (API) or HTML (UI) naming the
problem, `/healthz` answers between requests, and the log stays a few lines (requests
the HTTP parser refuses are logged once per interval, not with a traceback each). `TRACEPASS_QUERY_FUZZ` sets the
number of requests (more in `make reliability`)."""

from __future__ import annotations

import os
import random
import time
from pathlib import Path
from urllib.parse import quote

import pytest
from _serve import Serve, write_config
from test_normalize_basics import make_request, make_span

from tracepass.collector.api.params import FILTER_PARAMS

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

REQUESTS = int(os.environ.get("TRACEPASS_QUERY_FUZZ", "600"))
SEED = 21

ROUTES = (
    "/api/v1/conversations",
    "/api/v1/conversations/c-1",
    "/api/v1/agents",
    "/api/v1/failure-modes",
    "/api/v1/reference-candidates",
    "/api/v1/references/summary",
    "/ui/",
    "/ui/conversations",
    "/ui/failure-modes",
    "/ui/regressions",
)
NAMES = (
    *FILTER_PARAMS,
    "limit",
    "cursor",
    "window",
    "k",
    "baseline_version",
    "id",
    "",
    "x" * 600,
    "outcome[]",
    "\u202eoutcome",
)
ATOMS = (
    "",
    "fail",
    "pass,fail,error",
    "fail," * 200,
    "1h",
    "-1",
    "0",
    "1e309",
    "nan",
    "-inf",
    "9" * 400,
    "2026-11-27T00:00:00Z",
    "2026-13-45T99:99:99Z",
    "eyJhIjpbW1tbW1tbW11dXV1dXV1dfQ",
    "[" * 300,
    "\u202e\u200b\u2066evil",
    "\x00\x01\x7f",
    "é" * 300,
    "%",
    "%zz",
    "%c0%af",
    "' OR 1=1 --",
    "../../etc/passwd",
    "<script>alert(1)</script>",
)
ALLOWED = {200, 400, 404, 421, 503, 504}


def _value(rng: random.Random) -> str:
    parts = [rng.choice(ATOMS) for _ in range(rng.randint(1, 3))]
    text = "".join(parts)
    if rng.random() < 0.2:
        text = "".join(chr(rng.randint(1, 0x2FFF)) for _ in range(rng.randint(1, 40)))
    return text


def _query(rng: random.Random) -> str:
    pairs = []
    for _ in range(rng.choice((0, 1, 2, 3, 5, 40))):
        name = rng.choice(NAMES)
        value = _value(rng)
        raw = rng.random() < 0.1  # unencoded: the server's parser sees the debris itself
        pairs.append(
            f"{quote(name)}={value}"
            if raw and value.isascii() and value.isprintable() and " " not in value
            else f"{quote(name)}={quote(value)}"
        )
    return "&".join(pairs)


def _send_conversations(serve: Serve) -> None:
    """A handful of stored results for the queries to find."""
    for n in range(6):
        span = make_span(
            "invoke_agent fuzz-agent",
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": "fuzz-agent",
                "gen_ai.conversation.id": f"c-{n}",
                "gen_ai.input.messages": [{"role": "user", "content": "question 1"}],
                "gen_ai.output.messages": [
                    {"role": "assistant", "content": "answer 1" if n % 2 else "nope"}
                ],
            },
            trace_id=(n + 1).to_bytes(16, "big"),
        )
        body = make_request(span).SerializeToString()  # type: ignore[arg-type]
        assert serve.request("POST", "/v1/traces", body)[0] == 200


def test_seeded_query_fuzz_never_5xx(tmp_path: Path) -> None:
    serve = Serve(write_config(tmp_path, tmp_path / "state.db"))
    try:
        _send_conversations(serve)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            listed = serve.request("GET", "/api/v1/conversations?outcome=pass,fail,error,unscored")
            if listed[1].count(b'"conversation_id"') >= 6:
                break
            time.sleep(0.2)
        rng = random.Random(SEED)
        seen: dict[int, int] = {}
        for n in range(REQUESTS):
            path = rng.choice(ROUTES) + "?" + _query(rng)
            status, body = serve.request("GET", path)
            seen[status] = seen.get(status, 0) + 1
            assert status in ALLOWED, f"request {n}: {path[:200]!r} → {status}: {body[:200]!r}"
            # (A request line over aiohttp's 8190 bytes is refused by its parser, before
            # any handler: a plain-text 400.)
            if status == 400 and path.startswith("/api/") and len(path) < 8000:
                assert body.startswith(b"{"), body[:200]
            if n % 50 == 0:
                assert serve.request("GET", "/healthz")[0] == 200
        assert seen.get(200, 0) > 0, seen
        assert seen.get(400, 0) > 0, seen
        assert serve.proc.poll() is None
    finally:
        serve.stop()
    # Requests aiohttp's parser refuses (request line over 8190 bytes) were logged with a
    # traceback each, until the undrained log pipe blocked the server: now one line per
    # kind per interval (receiver/bad_request_log.py).
    assert serve.proc.stderr is not None
    log = serve.proc.stderr.read()
    assert "Traceback" not in log, log[-2000:]
    assert len(log) < 16_000, log[-2000:]
