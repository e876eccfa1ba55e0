"""Failure modes and the review queue in the PostgreSQL results store, against a real
throw-away cluster (`postgres_url`): `/api/v1/failure-modes` answers from the shared
database exactly as from the state file for the same results (counts, shares, first
and last seen, trend, examples, `new`), including the `failure_mode=` list filter;
re-evaluations and retention count down; the per-version bound is shared; a database of
schema version 1 is upgraded with its index filled from the stored summaries; a label
written through one replica's store is read through another's."""

from __future__ import annotations

import asyncio
from pathlib import Path

import psycopg
import pytest
from test_results_postgres import T0, _models, _result

from tracepass.collector.api.failure_modes import failure_modes, failure_versions
from tracepass.collector.pipeline.forwarding import ResultsForwarder
from tracepass.collector.state import StateStore, StoredResult
from tracepass.collector.state.postgres import PG_SCHEMA_VERSION, PostgresResults
from tracepass.collector.state.review_labels import ReviewLabel

pytestmark = [pytest.mark.system, pytest.mark.xdist_group("postgres"), pytest.mark.timeout(600)]

N = 40
SCOPES: list[dict[str, str]] = [
    {},
    {"agent_name": "travel"},
    {"agent_name": "travel", "agent_version": "1.1"},
    {"agent_name": "travel", "agent_version": "1.0"},
    {"agent_name": "travel", "agent_version": "1.1", "baseline_version": "1.0"},
    {"agent_name": "booking", "agent_version": "1.0", "limit": "1"},
    {"reference_set": "travel-refs"},
    {"agent_name": "nobody"},
]


def _now() -> float:
    return T0 + N * 10 + 5


def test_failure_modes_answer_like_sqlite(tmp_path: Path, postgres_url: str) -> None:
    sqlite_model, pg_model, close = _models(tmp_path, postgres_url, N)
    try:
        local, pg = sqlite_model.store, pg_model.store
        assert isinstance(pg, PostgresResults)
        for params in SCOPES:
            want = failure_modes(local, params, _now)
            assert failure_modes(pg, params, _now) == want, params
        assert failure_modes(local, {}, _now)["failure_modes"]  # there are failures
        assert failure_versions(pg) == failure_versions(local)
        assert pg.failure_modes.previous_version("travel", "1.1") == "1.0"
        assert pg.failure_modes.previous_version("travel", "1.0") is None
        for params in (
            {"since": "2023-11-14T22:15:00Z", "until": "2023-11-14T22:19:00Z"},
            {"agent_version": "1.1", "since": "2023-11-14T22:16:00Z"},
        ):
            want = failure_modes(local, params, _now)
            assert want["failure_modes"], params
            assert failure_modes(pg, params, _now) == want, params
        # The list filtered to a mode pages through the shared rows, like SQLite's.
        signature = failure_modes(local, {}, _now)["failure_modes"][0]["signature"]
        for params in ({"failure_mode": signature, "limit": "3"},
                       {"failure_mode": signature, "agent_version": "1.1", "outcome": "fail"}):  # fmt: skip
            want = sqlite_model.conversations(params)
            assert want["conversations"], params
            assert pg_model.conversations(params) == want, params
    finally:
        close()


def _counts(pg: PostgresResults, **params: str) -> dict[str, int]:
    body = failure_modes(pg, params, _now)
    return {m["signature"]: m["count"] for m in body["failure_modes"]} | {
        "": body["failing_conversations"]
    }


def test_revisions_and_retention_count_down(tmp_path: Path, postgres_url: str) -> None:
    store = StateStore(tmp_path / "s.sqlite")
    store.open()
    pg = PostgresResults(postgres_url)
    forwarder = ResultsForwarder(store, pg)

    async def put(i: int, revision: int, stored: StoredResult, at: float) -> None:
        await store.results.put_result(
            f"demo-{i}", revision=revision, closed_at=at, n_spans=3,
            stored=StoredResult(stored.conversation, stored.result, revision),
            evaluated_at=at,
        )  # fmt: skip
        while await forwarder.forward_once():
            pass

    async def run() -> None:
        await forwarder.start()
        await put(0, 0, _result(0), T0)  # failing: the wrong city
        await put(4, 0, _result(4), T0 + 1)  # failing too
        before = _counts(pg)
        assert before[""] == 2
        # demo-0 re-evaluated as passing (revision 1): its rows and count go.
        await put(0, 1, _result(1), T0 + 2)
        after = _counts(pg)
        assert after[""] == 1
        assert sum(after.values()) < sum(before.values())
        # Retention: demo-4 (evaluated at T0 + 1) goes with its rows.
        assert pg.purge_results(T0 + 1.5) == 1
        assert _counts(pg) == {"": 0}
        with psycopg.connect(postgres_url) as conn:
            assert conn.execute("SELECT count(*) FROM result_failure_modes").fetchone() == (0,)
            left = conn.execute("SELECT count(*) FROM failure_mode_minutes").fetchone()
            assert left == (0,)  # cells counted down to nothing are dropped
        await forwarder.shutdown()

    try:
        asyncio.run(run())
    finally:
        pg.close()
        store.close()


def test_the_bound_is_shared_between_replicas(tmp_path: Path, postgres_url: str) -> None:
    """Two stores on one database (two replicas), `max_per_version` 1: the version
    keeps one signature in all; later new ones are counted under `other`."""
    stores = [PostgresResults(postgres_url), PostgresResults(postgres_url)]
    files = [StateStore(tmp_path / f"{n}.sqlite") for n in range(2)]
    for pg in stores:
        pg.failure_modes.max_per_version = 1
    forwarders = [ResultsForwarder(f, pg) for f, pg in zip(files, stores, strict=True)]

    async def run() -> None:
        for f, fw in zip(files, forwarders, strict=True):
            f.open()
            await fw.start()
        # Failing results of one version with different signatures, half through each.
        failing = [i for i in range(0, 60, 2) if _result(i).result.outcome.value == "fail"]  # type: ignore[union-attr]
        for n, i in enumerate(failing):
            f, fw = files[n % 2], forwarders[n % 2]
            stored = _result(i)
            await f.results.put_result(
                f"demo-{i}", revision=0, closed_at=T0 + i, n_spans=3, stored=stored,
                evaluated_at=T0 + i,
            )  # fmt: skip
            while await fw.forward_once():
                pass
        for fw in forwarders:
            await fw.shutdown()

    try:
        asyncio.run(run())
        stores[0].open()
        modes = _counts(stores[0], agent_name="travel", agent_version="1.1")
        named = [s for s in modes if s not in ("", "other")]
        assert len(named) == 1, modes
        assert modes.get("other"), modes  # the second signature, past the bound
        assert sum(n for s, n in modes.items() if s) >= modes[""]  # every failure counted
    finally:
        for pg in stores:
            pg.close()
        for f in files:
            f.close()


def test_a_version_1_database_is_upgraded_with_its_failure_modes(
    tmp_path: Path, postgres_url: str
) -> None:
    sqlite_model, pg_model, close = _models(tmp_path, postgres_url, N)
    try:
        pg = pg_model.store
        assert isinstance(pg, PostgresResults)
        want = failure_modes(pg, {"agent_name": "travel", "agent_version": "1.1"}, _now)
        assert want["failure_modes"]
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            # What version 1 had: no failure-mode tables.
            for table in ("result_failure_modes", "failure_mode_minutes", "failure_mode_hours",
                          "failure_mode_versions", "failure_mode_signatures"):  # fmt: skip
                conn.execute(f"DROP TABLE {table}")
            conn.execute("UPDATE tracepass_meta SET value='1' WHERE key='schema_version'")
        again = PostgresResults(postgres_url)
        again.open()
        try:
            got = failure_modes(again, {"agent_name": "travel", "agent_version": "1.1"}, _now)
            assert got == want
            assert failure_versions(again) == failure_versions(sqlite_model.store)
            with psycopg.connect(postgres_url) as conn:
                version = conn.execute(
                    "SELECT value FROM tracepass_meta WHERE key='schema_version'"
                ).fetchone()
            assert version == (str(PG_SCHEMA_VERSION),)
        finally:
            again.close()
    finally:
        close()


def test_a_label_given_on_one_replica_shows_on_another(postgres_url: str) -> None:
    a, b = PostgresResults(postgres_url), PostgresResults(postgres_url)
    a.open()
    b.open()

    async def run() -> None:
        await a.review.open()
        assert await a.review.enqueue("c-1", "failing", T0)
        assert not await b.review.enqueue("c-1", "manual", T0 + 1)  # the first reason stays
        await b.review.put_label(
            ReviewLabel("c-2", passed=False, turns={0: True}, comment="é", labelled_at=T0 + 2)
        )
        await a.review.put_label(ReviewLabel("c-2", passed=True, labelled_at=T0 + 3))

    try:
        asyncio.run(run())
        assert [i.conversation_id for i in b.review.queue()] == ["c-1"]
        assert [(i.conversation_id, i.reason, i.labelled) for i in a.review.queue(pending_only=False)] == [
            ("c-1", "failing", False), ("c-2", "manual", True)]  # fmt: skip
        assert a.review.counts() == b.review.counts() == (2, 1)
        label = b.review.label("c-2")
        assert label is not None
        assert (label.passed, label.turns, label.comment) == (True, {}, "")
        assert b.review.labels() == a.review.labels()
        assert a.review.queued("nope") is None
    finally:
        a.close()
        b.close()
