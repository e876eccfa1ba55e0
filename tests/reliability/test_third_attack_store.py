"""Issue 33 (the third attack), the shared store and the database, through the real
`tracepass serve` and a real PostgreSQL:

1. One NUL (`\\u0000`) in a conversation id or an agent name used to fail the outbox
   batch holding it forever (20 of 71 results stored): now every result arrives (the
   store keeps U+FFFD in place of NUL), and a NUL in an API filter or a review label is
   a 400, not a 500. A row the database refuses on its own (here a CHECK constraint the
   test adds) is set aside and counted; the rows after it still go.
5. A hung database (every server process SIGSTOPped; a network black hole that keeps
   connections open and answers nothing) used to leave API reads unanswered: they
   answer 503 naming the database within the client-side deadline, ingest unaffected.
12. The UI overview answers 503 then too (it was a 500).
6. A results database (PostgreSQL) or state file (SQLite) written by a newer
   tracepass, or whose `schema_version` is unreadable, is refused at start-up: exit 2
   with the reason.

`TRACEPASS_NUL_CONVERSATIONS` (default 71) sets how many conversations the NUL and
set-aside tests send (`make reliability`: 2,000).
"""

from __future__ import annotations

import http.client
import json
import os
import sqlite3
import subprocess
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import psycopg
import pytest
import yaml
from _pg_faults import FaultProxy, stopped
from _serve import TRACEPASS, Serve, write_config

pytestmark = [
    pytest.mark.system,
    pytest.mark.xdist_group("postgres"),
    pytest.mark.timeout(900),
]

CONVERSATIONS = int(os.environ.get("TRACEPASS_NUL_CONVERSATIONS", "71"))
WRITE_TOKEN = "third-attack-token"
# The store's read deadline is 2 s (`PostgresResults.read_timeout_s`); the client waits
# far longer, so only an unbounded wait fails (it used to never answer).
CLIENT_TIMEOUT_S = 20.0
T = TypeVar("T")


def wait_for(fn: Callable[[], T | None], what: str, timeout: float = 180.0) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def _str(key: str, value: str) -> dict[str, Any]:
    return {"key": key, "value": {"stringValue": value}}


def _messages(role: str, text: str) -> str:
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": text}]}])


def otlp_json(conversations: list[tuple[str, str]], seed: int = 0) -> bytes:
    """One OTLP/JSON request: per (conversation id, agent), two turns passing the
    reference of `_serve.REFERENCES`."""
    spans = []
    now = time.time_ns()
    for i, (conversation, agent) in enumerate(conversations):
        for turn in range(2):
            n = (seed * 1_000_000 + i) * 2 + turn + 1
            spans.append(
                {
                    "traceId": f"{n:032x}",
                    "spanId": f"{n:016x}",
                    "name": f"invoke_agent {agent}",
                    "kind": 1,
                    "startTimeUnixNano": str(now + turn * 1000),
                    "endTimeUnixNano": str(now + turn * 1000 + 500),
                    "attributes": [
                        _str("gen_ai.operation.name", "invoke_agent"),
                        _str("gen_ai.conversation.id", conversation),
                        _str("gen_ai.agent.name", agent),
                        _str("gen_ai.input.messages", _messages("user", f"question {turn}")),
                        _str("gen_ai.output.messages", _messages("assistant", f"answer {turn}")),
                    ],
                }
            )
    doc = {
        "resourceSpans": [
            {
                "resource": {"attributes": [_str("service.name", "third-attack")]},
                "scopeSpans": [{"scope": {"name": "tests.third_attack"}, "spans": spans}],
            }
        ]
    }
    return json.dumps(doc).encode()


def call(
    serve: Serve,
    method: str,
    path: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
    timeout: float = CLIENT_TIMEOUT_S,
) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", serve.port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def send(serve: Serve, conversations: list[tuple[str, str]], seed: int = 0) -> None:
    for start in range(0, len(conversations), 100):
        body = otlp_json(conversations[start : start + 100], seed * 1000 + start)
        status, text = call(serve, "POST", "/v1/traces", body, {"Content-Type": "application/json"})
        assert status == 200, (status, text[:300])


def stored(url: str) -> dict[str, str]:
    """conv_key → agent_name of every result in the database."""
    with psycopg.connect(url, autocommit=True) as conn:
        return {str(k): str(a) for k, a in conn.execute("SELECT conv_key, agent_name FROM results")}


def pg_config(tmp_path: Path, url: str, **sections: dict[str, Any]) -> Path:
    """`_serve.write_config` with `state.results_url` (its `state` argument is the path)."""
    config = write_config(tmp_path, tmp_path / "state.sqlite", **sections)
    doc = yaml.safe_load(config.read_text(encoding="utf-8"))
    doc["state"]["results_url"] = url
    config.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return config


def _serve(tmp_path: Path, url: str) -> Serve:
    return Serve(pg_config(tmp_path, url, api={"write_token": WRITE_TOKEN}))


def _counter(serve: Serve, name: str) -> float:
    return sum(v for (n, _), v in serve.samples().items() if n == name)


def test_one_nul_never_stops_the_shared_store(tmp_path: Path, postgres_url: str) -> None:
    poisoned = CONVERSATIONS // 7
    convs = [
        (f"conv-{i}", "travel") if i != poisoned else ("nul\x00conv", "agent\x00name")
        for i in range(CONVERSATIONS)
    ]
    serve = _serve(tmp_path, postgres_url)
    try:
        send(serve, convs)
        rows = wait_for(
            lambda: r if len(r := stored(postgres_url)) >= CONVERSATIONS else None,
            f"{CONVERSATIONS} results in PostgreSQL",
        )
        assert len(rows) == CONVERSATIONS
        assert rows["nul\ufffdconv"] == "agent\ufffdname"  # kept, with U+FFFD for NUL
        assert _counter(serve, "tracepass_results_backlog") == 0

        # Every result is listed; the poisoned one reads back under its cleaned id.
        status, body = call(serve, "GET", "/api/v1/conversations?limit=500")
        assert status == 200, body[:300]
        listed = {c["conversation_id"] for c in json.loads(body)["conversations"]}
        assert len(listed) == min(CONVERSATIONS, 500)
        path = "/api/v1/conversations/" + urllib.parse.quote("nul\ufffdconv")
        assert call(serve, "GET", path)[0] == 200

        # A NUL in any filter (or a parameter name) is a 400 naming it, never a 500.
        for name in (
            "agent_name",
            "agent_version",
            "reference_id",
            "reference_set",
            "violation",
            "failure_mode",
            "outcome",
            "cursor",
            "since",
        ):
            status, body = call(serve, "GET", f"/api/v1/conversations?{name}=a%00b")
            assert status == 400, (name, status, body[:300])
            assert b"NUL" in body
        assert call(serve, "GET", "/api/v1/failure-modes?agent_name=%00")[0] == 400
        assert call(serve, "GET", "/ui/conversations?agent_name=%00")[0] == 400

        # A review label with NUL in its text is a 400; the same label without is stored.
        label = "/api/v1/review/conv-1/label"
        auth = {"Authorization": f"Bearer {WRITE_TOKEN}", "Content-Type": "application/json"}
        for field in ("comment", "reviewer"):
            doc = {"passed": "pass", field: "a\x00b"}
            status, body = call(serve, "POST", label, json.dumps(doc).encode(), auth)
            assert status == 400, (field, status, body[:300])
        doc = {"passed": "pass", "comment": "fine"}
        assert call(serve, "POST", label, json.dumps(doc).encode(), auth)[0] == 200
        # A label on the poisoned conversation (its id carries NUL) is stored too.
        nul_label = "/api/v1/review/" + urllib.parse.quote("nul\x00conv") + "/label"
        status, body = call(serve, "POST", nul_label, json.dumps(doc).encode(), auth)
        assert status in (200, 404), (status, body[:300])
    finally:
        serve.stop()


def test_a_row_the_database_refuses_is_set_aside(tmp_path: Path, postgres_url: str) -> None:
    serve = _serve(tmp_path, postgres_url)
    try:
        # The schema exists from start-up on; a constraint refuses one agent's rows.
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(
                "ALTER TABLE results ADD CONSTRAINT no_poison "
                "CHECK (agent_name IS DISTINCT FROM 'poison')"
            )
        convs = [(f"conv-{i}", "poison" if i == 3 else "travel") for i in range(CONVERSATIONS)]
        send(serve, convs)
        wait_for(
            lambda: _counter(serve, "tracepass_results_refused_total") >= 1,
            "the refused row to be counted",
        )
        wait_for(lambda: len(stored(postgres_url)) >= CONVERSATIONS - 1, "the other rows")
        later = [(f"later-{i}", "travel") for i in range(5)]
        send(serve, later, seed=1)
        rows = wait_for(
            lambda: r if len(r := stored(postgres_url)) >= CONVERSATIONS + 4 else None,
            "the rows sent after the refused one",
        )
        assert "conv-3" not in rows
        assert len(rows) == CONVERSATIONS + 4
        assert _counter(serve, "tracepass_results_refused_total") == 1
        assert wait_for(
            lambda: _counter(serve, "tracepass_results_backlog") == 0 or None, "an empty outbox"
        )
    finally:
        serve.stop()
    assert "refused the result of 'conv-3'" in (
        serve.proc.stderr.read() if serve.proc.stderr else ""
    )


@pytest.mark.parametrize("fault", ["sigstop", "blackhole", "down"])
def test_a_hung_database_makes_reads_503_not_hang(
    tmp_path: Path, postgres_cluster: Any, postgres_url: str, fault: str
) -> None:
    proxy = FaultProxy(postgres_cluster.port)
    database = urllib.parse.urlsplit(postgres_url).path.lstrip("/")
    serve = _serve(tmp_path, proxy.url(database))
    try:
        send(serve, [(f"before-{i}", "travel") for i in range(5)])
        wait_for(lambda: len(stored(postgres_url)) >= 5, "the first results")
        for path in ("/api/v1/conversations", "/ui/"):
            assert call(serve, "GET", path)[0] == 200
        label = f"127.0.0.1:{proxy.port}"

        def check_reads() -> None:
            for path in (
                "/api/v1/conversations",
                "/api/v1/failure-modes",
                "/ui/",
                "/ui/conversations",
                "/api/v1/references/summary",
            ):
                status, body = call(serve, "GET", path)
                assert status == 503, (fault, path, status, body[:500])
                assert label.encode() in body, (path, body[:500])
            # Ingest is unaffected: spans are taken, results wait in the outbox.
            send(serve, [(f"during-{i}", "travel") for i in range(5)], seed=2)
            assert call(serve, "GET", "/healthz")[0] == 200

        if fault == "sigstop":
            with stopped(postgres_url):
                check_reads()
        else:
            proxy.set_mode(fault)
            try:
                check_reads()
            finally:
                proxy.set_mode("pass")
        # Back: everything sent meanwhile arrives, reads answer again.
        wait_for(lambda: len(stored(postgres_url)) >= 10, "the results sent during the fault")
        wait_for(lambda: call(serve, "GET", "/ui/")[0] == 200, "the UI to answer again")
    finally:
        serve.stop()
        proxy.close()


def _run_serve(config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(TRACEPASS), "serve", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize(("version", "says"), [("99", "version 99"), ("banana", "unreadable")])
def test_a_newer_or_unreadable_postgres_schema_is_exit_2(
    tmp_path: Path, postgres_url: str, version: str, says: str
) -> None:
    from tracepass.collector.state.postgres import PostgresResults

    results = PostgresResults(postgres_url)
    results.open()
    try:
        results.ensure_schema()
    finally:
        results.close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(
            "UPDATE tracepass_meta SET value = %s WHERE key = 'schema_version'", (version,)
        )
    config = pg_config(tmp_path, postgres_url)
    done = _run_serve(config)
    assert done.returncode == 2, done.stderr[-2000:]
    assert says in done.stderr
    assert "schema" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(("version", "says"), [("99", "version 99"), ("x7", "unreadable")])
def test_a_newer_or_unreadable_state_file_is_exit_2(
    tmp_path: Path, version: str, says: str
) -> None:
    state = tmp_path / "state.sqlite"
    config = write_config(tmp_path, state)
    Serve(config).stop()
    with sqlite3.connect(state) as conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (version,))
    done = _run_serve(config)
    assert done.returncode == 2, done.stderr[-2000:]
    assert says in done.stderr
    assert str(state) in done.stderr
    assert "Traceback" not in done.stderr
    with sqlite3.connect(state) as conn:  # refused before anything changed the file
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    assert row == (version,)
