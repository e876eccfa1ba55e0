"""The PostgreSQL results store against a real, throw-away cluster (`postgres_url`):
every read-model query answers exactly as the SQLite store does for the same results,
results travel through the state file's outbox, a newer schema is refused, an older
one gains its missing columns, and retention deletes old results."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tracepass.collector.api.pooled import pooled_snapshots
from tracepass.collector.api.read_model import ReadModel
from tracepass.collector.pipeline.forwarding import ResultsForwarder
from tracepass.collector.state import StateError, StateStore, StoredResult
from tracepass.collector.state.postgres import PG_SCHEMA_VERSION, PostgresResults, redact_url
from tracepass.evaluator.models import (
    Conversation,
    ExpectedTool,
    Reference,
    ReferenceTurn,
    ToolCall,
    Turn,
    Violation,
)
from tracepass.evaluator.scoring.evaluator import Evaluator
from tracepass.evaluator.stats.rolling import RollingConfig

pytestmark = [pytest.mark.system, pytest.mark.xdist_group("postgres"), pytest.mark.timeout(600)]

T0 = 1_700_000_000.0
ROLLING = RollingConfig(windows=(("1h", 3600.0), ("10m", 600.0)), min_conversations=1)
REFERENCES = {
    f"ref-{r}": Reference(
        id=f"ref-{r}",
        turns=(
            ReferenceTurn(
                query=f"weather in city {r}?",
                expected_answer="sunny",
                expected_tools=(ExpectedTool(name="forecast", arguments={"city": f"c{r}"}),),
            ),
        ),
    )
    for r in range(3)
}


def _result(i: int) -> StoredResult:
    """Conversation `demo-i`: agents travel/booking, versions 1.0/1.1, three references,
    passing or failing by its tool argument, some with policy violations."""
    ref = f"ref-{i % 3}"
    city = f"c{i % 3}" if i % 4 else "elsewhere"
    conv = Conversation(
        id=f"demo-{i}",
        agent_name="travel" if i % 5 else "booking",
        agent_version="1.0" if i % 2 else "1.1",
        trace_ids=(f"{i:032x}",),
        turns=(
            Turn(
                query=f"weather in city {i % 3}?",
                answer="sunny",
                tool_calls=(ToolCall(name="forecast", arguments={"city": city}),),
            ),
        ),
    )
    result = Evaluator().evaluate(conv, REFERENCES[ref], reference_set="travel-refs")
    if i % 7 == 0:
        violation = Violation(rule="forbidden_tool", turn=0, tool_call=0, message="no")
        result = result.model_copy(update={"violations": (violation,)})
    return StoredResult(conv, result, 0)


async def _put_all(store: StateStore, n: int) -> None:
    for i in range(n):
        await store.put_result(
            f"demo-{i}",
            revision=0,
            closed_at=T0 + i * 10,
            n_spans=3,
            stored=_result(i),
            evaluated_at=T0 + i * 10,
        )


def _models(tmp_path: Path, url: str, n: int) -> tuple[ReadModel, ReadModel, Any]:
    """The same `n` results in a SQLite store and, through the outbox, in PostgreSQL."""
    local = StateStore(tmp_path / "local.sqlite")
    local.open()
    shared_file = StateStore(tmp_path / "forwarding.sqlite")
    shared_file.open()
    pg = PostgresResults(url)
    forwarder = ResultsForwarder(shared_file, pg, batch_size=7)

    async def fill() -> None:
        await _put_all(local, n)
        await _put_all(shared_file, n)
        await forwarder.start()
        assert forwarder.backlog == n
        while await forwarder.forward_once():
            pass
        assert forwarder.backlog == 0
        assert forwarder.forwarded == n
        await forwarder.shutdown()

    asyncio.run(fill())
    pg.open()
    now = lambda: T0 + n * 10 + 5  # noqa: E731
    sqlite_model = ReadModel(local, pooled_snapshots(local, ROLLING, now), ROLLING, clock=now)
    pg_model = ReadModel(pg, pooled_snapshots(pg, ROLLING, now), ROLLING, clock=now)

    def close() -> None:
        pg.close()
        local.close()
        shared_file.close()

    return sqlite_model, pg_model, close


QUERIES: list[dict[str, str]] = [
    {},
    {"limit": "5"},
    {"outcome": "fail"},
    {"outcome": "fail,pass", "limit": "4"},
    {"agent_name": "travel"},
    {"agent_name": "travel", "agent_version": "1.1"},
    {"reference_id": "ref-1"},
    {"reference_set": "travel-refs", "outcome": "pass"},
    {"violation": "forbidden_tool"},
    {"violation": "forbidden_tool", "outcome": "fail"},
    {"since": "2023-11-14T22:15:00Z", "until": "2023-11-14T22:17:00Z"},
]


def test_postgres_answers_every_query_like_sqlite(tmp_path: Path, postgres_url: str) -> None:
    sqlite_model, pg_model, close = _models(tmp_path, postgres_url, 40)
    try:
        for params in QUERIES:
            expected = sqlite_model.conversations(params)
            assert expected["conversations"], params  # the query selects something
            assert pg_model.conversations(params) == expected, params
            # Every page of the cursor walk, too.
            cursor = expected["next_cursor"]
            while cursor is not None:
                page = sqlite_model.conversations({**params, "cursor": cursor})
                assert pg_model.conversations({**params, "cursor": cursor}) == page
                cursor = page["next_cursor"]
        for params in (
            {"window": "1h", "agent_name": "travel", "agent_version": "1.1"},
            {"window": "1h", "agent_name": "travel", "agent_version": "1.1",
             "baseline_version": "1.0"},
        ):  # fmt: skip
            assert pg_model.reference_summary(params) == sqlite_model.reference_summary(params)
        assert pg_model.agents() == sqlite_model.agents()
        assert len(pg_model.agents()["agents"]) == 4  # 2 agents x 2 versions
        assert pg_model.store is not None
        assert sqlite_model.store is not None
        assert pg_model.store.outcome_trend(T0, 12) == sqlite_model.store.outcome_trend(T0, 12)
        for key in ("demo-0", "demo-7", "demo-39"):
            got = pg_model.store.get_result(key)
            want = sqlite_model.store.get_result(key)
            assert got is not None
            assert want is not None
            assert got.result == want.result
            assert got.conversation == want.conversation
        assert pg_model.store.get_result("nope") is None
    finally:
        close()


def test_a_batch_keeps_the_newest_revision_and_resending_changes_nothing(
    tmp_path: Path, postgres_url: str
) -> None:
    store = StateStore(tmp_path / "s.sqlite")
    store.open()
    pg = PostgresResults(postgres_url)
    forwarder = ResultsForwarder(store, pg)

    async def run() -> None:
        await forwarder.start()
        for revision in (0, 2, 1):  # 1 arrives late: older than 2, must not win
            stored = _result(3)
            stored = StoredResult(stored.conversation, stored.result, revision)
            await store.put_result(
                "demo-3", revision=revision, closed_at=T0 + revision, n_spans=3,
                stored=stored, evaluated_at=T0 + revision,
            )  # fmt: skip
        rows = forwarder.outbox.peek(10)
        assert [r.revision for r in rows] == [0, 2, 1]
        pg.write_batch(rows)
        pg.write_batch(rows)  # sent again (a crash before the outbox row was deleted)
        await forwarder.shutdown()

    try:
        asyncio.run(run())
        pg.open()
        stored = pg.get_result("demo-3")
        assert stored is not None
        assert stored.revision == 2
        with psycopg.connect(postgres_url) as conn:
            assert conn.execute("SELECT count(*) FROM results").fetchone() == (1,)
            rules = conn.execute("SELECT rule, conv_key FROM result_violations").fetchall()
        assert rules == []  # demo-3 has no violation
        # The local row is bookkeeping only (what recovery and retention read).
        local = store.reader.execute("SELECT revision, view FROM results").fetchall()
        assert local == [(2, "")]
    finally:
        pg.close()
        store.close()


def test_schema_versions(postgres_url: str) -> None:
    pg = PostgresResults(postgres_url)
    pg.open()
    try:
        pg.ensure_schema()
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            version = conn.execute(
                "SELECT value FROM tracepass_meta WHERE key='schema_version'"
            ).fetchone()
            assert version == (str(PG_SCHEMA_VERSION),)
            # An older database: a column it lacks is added on open.
            conn.execute("ALTER TABLE results DROP COLUMN failed_turns")
        again = PostgresResults(postgres_url)
        again.open()
        again.ensure_schema()
        again.close()
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            columns = {
                r[0]
                for r in conn.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_name='results'"
                )
            }
            assert "failed_turns" in columns
            # A database written by a newer tracepass is refused, naming it.
            conn.execute("UPDATE tracepass_meta SET value='99' WHERE key='schema_version'")
        newer = PostgresResults(postgres_url)
        newer.open()
        with pytest.raises(StateError, match="results schema version 99"):
            newer.ensure_schema()
        newer.close()
    finally:
        pg.close()


def test_retention_deletes_old_results(tmp_path: Path, postgres_url: str) -> None:
    _, pg_model, close = _models(tmp_path, postgres_url, 10)
    try:
        pg = pg_model.store
        assert isinstance(pg, PostgresResults)
        assert pg.purge_results(T0 + 45) == 5  # evaluated at T0, T0+10, … T0+40
        ids = [c["conversation_id"] for c in pg_model.conversations({})["conversations"]]
        assert sorted(ids) == [f"demo-{i}" for i in range(5, 10)]
    finally:
        close()


def test_passwords_never_reach_logs_or_errors() -> None:
    assert redact_url("postgresql://u:s3cret@db:5432/x") == "postgresql://u:***@db:5432/x"
    assert redact_url("postgresql://db/x") == "postgresql://db/x"
