"""Issue 21 item 6: query amplification on /api/v1/* and the UI.

Before: `outcome=fail` repeated 1,500 times plus `reference_set=nope` on 100k stored
results ran 1,500 queries, each scanning every failing result (no `reference_set`
index), on the event loop: one 7.5 KB GET took 73 s and blocked `/healthz` for up to
79 s. Now parameters are de-duplicated and bounded (400), every filter pages through
an index, and queries run in a worker thread that SQLite interrupts at
`limits.query_timeout_s` (504).

The fast version stores RESULTS results (the attack's 100k in `make reliability`:
`TRACEPASS_QUERY_RESULTS`). Timing is never asserted: the number of statements and
their query plans are (SQLite's own trace and EXPLAIN QUERY PLAN), and the event loop
is shown to keep running while a query is held past its limit."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import sqlite3
from pathlib import Path
from urllib.parse import parse_qsl

import pytest
from _serve import Serve, write_config

from tracepass.collector.api.params import FILTER_PARAMS, ParamError, check_bounds
from tracepass.collector.api.query_guard import QueryGuard, QueryTimeout
from tracepass.collector.api.read_model import ReadModel
from tracepass.collector.state import StateStore
from tracepass.evaluator.stats.rolling import RollingConfig

RESULTS = int(os.environ.get("TRACEPASS_QUERY_RESULTS", "20000"))
ATTACK = "outcome=" + ",".join(["fail"] * 1500) + "&reference_set=nope"
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def _fill(path: Path, n: int = RESULTS) -> None:
    """`n` results in the real schema (written by the real store), index columns set."""
    store = StateStore(path)
    store.open()
    store.close()
    conn = sqlite3.connect(path)
    outcomes = ("pass", "fail", "fail", "error", "incomplete")
    rows = (
        (
            f"c{i}",
            0,
            1_700_000_000.0 + i,
            1_700_000_000.0 + i,
            3,
            "{}",
            f"agent{i % 5}",
            f"v{i % 7}",
            f"set{i % 3}",
            f"ref{i % 50}",
            outcomes[i % len(outcomes)],
            1,
            0,
            '{"reasons":[],"trace_ids":[]}',
        )
        for i in range(n)
    )
    conn.executemany(
        "INSERT INTO results (conv_key, revision, closed_at, evaluated_at, n_spans, view, "
        "agent_name, agent_version, reference_set, reference_id, outcome, turns, "
        "failed_turns, summary) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        rows,
    )
    conn.commit()
    conn.close()


def _model(path: Path, timeout_s: float = 60.0) -> tuple[StateStore, ReadModel]:
    store = StateStore(path)
    store.open()
    model = ReadModel(
        store,
        lambda: [],
        RollingConfig(windows=(("1h", 3600.0),)),
        clock=lambda: 1_700_000_000.0 + RESULTS,
        query_timeout_s=timeout_s,
    )
    return store, model


def _statements(store: StateStore, run: object) -> list[str]:
    conn = store.read_connection()
    assert conn is not None
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    try:
        assert callable(run)
        run()
    finally:
        conn.set_trace_callback(None)
    return [s for s in seen if s.lstrip().upper().startswith("SELECT")]


def test_repeated_outcomes_are_one_query_and_every_filter_is_indexed(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    _fill(path)
    store, model = _model(path)
    try:
        attack = dict(parse_qsl(ATTACK))
        statements = _statements(store, lambda: model.conversations(attack))
        assert len(statements) == 1, len(statements)  # was 1,500
        conn = store.read_connection()
        assert conn is not None
        values = {
            "outcome": "fail",
            "agent_name": "agent1",
            "agent_version": "v1",
            "reference_id": "ref1",
            "reference_set": "nope",
            "violation": "rule",
            "since": "1700000000",
            "until": "1700009000",
            "failure_mode": "missing_tool:search",
            "min_cost_usd": "0.01",
            "min_duration_s": "2",
        }
        assert set(values) == set(FILTER_PARAMS)
        # Each filter alone and in pairs: every statement reads through an index in
        # completion order (no full scan, no sort of everything that matches).
        combos = [(name,) for name in values] + list(itertools.combinations(values, 2))
        for combo in combos:
            params = {name: values[name] for name in combo}
            for sql in _statements(store, lambda p=params: model.conversations(p)):
                plan = " | ".join(row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql))
                assert "USING" in plan, (combo, plan)
                scans = [part for part in plan.split(" | ") if part.startswith("SCAN")]
                assert all("INDEX" in part for part in scans), (combo, plan)
                assert (
                    "TEMP B-TREE" not in plan
                    # range filters read an index range, then order what matched
                    or "since" in combo
                    or "until" in combo
                    or "min_cost_usd" in combo
                    or "min_duration_s" in combo
                    or ("outcome" in combo)
                ), (combo, plan)
    finally:
        store.close()


def test_parameters_are_bounded() -> None:
    with pytest.raises(ParamError):
        check_bounds([("outcome", "fail")] * 100)
    with pytest.raises(ParamError):
        check_bounds([("agent_name", "x" * 5000)])
    check_bounds([(name, "x") for name in FILTER_PARAMS])


def test_slow_query_is_interrupted_off_the_event_loop(tmp_path: Path) -> None:
    """A query that never ends (a recursive CTE) runs in the guard's thread: the event
    loop keeps ticking meanwhile, and SQLite interrupts the query at the limit."""
    conn = sqlite3.connect(tmp_path / "x.sqlite", check_same_thread=False)
    guard = QueryGuard(lambda: conn, time_limit_s=1.0)
    endless = (
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
    )

    async def scenario() -> int:
        ticks = 0
        task = asyncio.ensure_future(guard.run(lambda: conn.execute(endless).fetchone()))
        while not task.done():
            ticks += 1
            await asyncio.sleep(0.01)
        with pytest.raises(QueryTimeout):
            await task
        return ticks

    try:
        ticks = asyncio.run(scenario())
        assert ticks >= 5  # the loop ran while the query did (it cannot block it)
        assert guard.timeouts == 1
        # The connection is still usable for others afterwards.
        assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        guard.close()
        conn.close()


def test_attack_over_http_and_ui(tmp_path: Path) -> None:
    """The attack's GET through the real collector (API and UI): answered, `/healthz`
    answered too, and too many parameters are a 400 naming one."""
    state = tmp_path / "state.sqlite"
    _fill(state)
    serve = Serve(write_config(tmp_path, state))
    try:
        # The attack's 7.5 KB value is refused outright, naming the parameter ...
        status, body = serve.request("GET", "/api/v1/conversations?" + ATTACK)
        assert status == 400, body[:300]
        assert json.loads(body)["parameter"] == "outcome"
        assert serve.request("GET", "/ui/conversations?" + ATTACK)[0] == 400
        # ... and a repeated list within the bounds is one query, answered.
        repeated = "outcome=" + ",".join(["fail"] * 100) + "&reference_set=nope"
        status, body = serve.request("GET", "/api/v1/conversations?" + repeated)
        assert status == 200, body[:300]
        assert json.loads(body)["conversations"] == []
        assert serve.request("GET", "/ui/conversations?" + repeated)[0] == 200
        assert serve.request("GET", "/healthz")[0] == 200
        many = "&".join(f"outcome=fail&agent_name=a{i}" for i in range(40))
        status, body = serve.request("GET", "/api/v1/conversations?" + many)
        assert status == 400
        assert "parameter" in json.loads(body)
        assert serve.request("GET", "/ui/conversations?" + many)[0] == 400
    finally:
        serve.stop()
