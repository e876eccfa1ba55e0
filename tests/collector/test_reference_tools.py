"""Result row format 4: each reference's expected tools are stored once, in the
`reference_tools` table, not in every result row (SQLite and PostgreSQL alike).

What must hold: the API reads the same JSON from a format-4 row as from the format-3
row the branch before wrote for the same result (conversation view and list, both
stores, read back cold by a fresh process-side cache); format-3 rows in a file or
database keep reading; files and databases of the schema before are upgraded; a row
naming a list the store lacks is an error, never a result without its tools."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tracepass.collector.api.pooled import pooled_snapshots
from tracepass.collector.api.read_model import ReadModel
from tracepass.collector.api.views import stored_view_json
from tracepass.collector.pipeline.forwarding import ResultsForwarder
from tracepass.collector.state import ResultWrite, StateStore, StoredResult
from tracepass.collector.state.codec import (
    RESULT_FORMAT,
    SELF_CONTAINED_FORMAT,
    decode_result,
    encode_result,
)
from tracepass.collector.state.postgres import PG_SCHEMA_VERSION, PostgresResults
from tracepass.collector.state.reference_tools import ReferenceTools, ToolsLookup
from tracepass.collector.state.store import SCHEMA_VERSION
from tracepass.evaluator.models import (
    Conversation,
    ExpectedTool,
    Reference,
    ReferenceTurn,
    ToolCall,
    Turn,
)
from tracepass.evaluator.scoring.evaluator import Evaluator
from tracepass.evaluator.stats.rolling import RollingConfig

T0 = 1_700_000_000.0
ROLLING = RollingConfig(windows=(("1h", 3600.0),), min_conversations=1)
N = 24
REFERENCES = {
    f"ref-{r}": Reference(
        id=f"ref-{r}",
        turns=(
            ReferenceTurn(
                query=f"book trip {r}",
                expected_answer="booked",
                expected_tools=(
                    ExpectedTool(name="search", arguments={"city": f"c{r}", "n": 1.5}),
                    ExpectedTool(
                        name="book", arguments={"id": r}, argument_match="subset", agent="sub"
                    ),
                ),
            ),
            # The second turn checks no tools: null in the stored list.
            ReferenceTurn(query="thanks", expected_answer="welcome"),
        ),
    )
    for r in range(3)
}


def _result(i: int) -> StoredResult:
    """Conversation `c-i` scored by the real evaluator: three references, passing or
    failing by its tool argument, one, two or three turns (a turn beyond the
    reference's has no expected tools)."""
    r = i % 3
    turns = [
        Turn(
            query=f"book trip {r}",
            answer="booked ünï",
            tool_calls=(
                ToolCall(name="search", arguments={"city": f"c{r}" if i % 4 else "x", "n": 1.5}),
                ToolCall(name="book", arguments={"id": r, "extra": [1, None]}, result={"ok": 1}),
            ),
        )
    ]
    for extra in range((i // 3) % 3):
        turns.append(Turn(query="thanks" if extra == 0 else "more?", answer="welcome"))
    conversation = Conversation(
        id=f"c-{i}", agent_name="travel", agent_version=f"1.{i % 2}", turns=tuple(turns)
    )
    result = Evaluator().evaluate(conversation, REFERENCES[f"ref-{r}"], reference_set="trips")
    return StoredResult(conversation, result, i % 2)


RESULTS = [_result(i) for i in range(N)]


def _self_contained(store: StateStore) -> StateStore:
    """`store` writing format 3, as the branch before this format did (the same bytes:
    without a `reference_tools` row `encode_result` writes format 3)."""
    store.results.reference_tools.of = lambda result: None  # type: ignore[method-assign]
    return store


async def _put(store: StateStore, results: list[StoredResult]) -> None:
    for start in range(0, len(results), 8):  # as serve: several per writer op
        await store.results.put_results(
            [
                ResultWrite(s.conversation.id, s.revision, T0 + i, 3, s, T0 + i)
                for i, s in enumerate(results[start : start + 8], start)
            ]
        )


def _views(results: Any) -> dict[str, str]:
    """What `GET /api/v1/conversations/{id}` answers for every result, as bytes."""
    out = {}
    for s in RESULTS:
        got = results.get_result(s.conversation.id)
        assert got is not None
        out[s.conversation.id] = json.dumps(stored_view_json(got), ensure_ascii=False)
    return out


def _listed(results: Any) -> list[dict[str, Any]]:
    now = lambda: T0 + N + 5  # noqa: E731
    model = ReadModel(results, pooled_snapshots(results, ROLLING, now), ROLLING, clock=now)
    return list(model.conversations({"limit": "100"})["conversations"])


def _formats(rows: list[tuple[str]]) -> list[int]:
    return sorted({json.loads(text)["v"] for (text,) in rows})


def test_format_4_names_the_tools_and_decodes_to_the_same_result() -> None:
    tools = ReferenceTools()
    for stored in RESULTS:
        assert stored.result is not None
        row = tools.of(stored.result)
        assert row is not None
        assert tools.of(stored.result) is row  # encoded once per reference (and turn count)
        text = encode_result(stored, row.digest)
        data = json.loads(text)
        assert data["v"] == RESULT_FORMAT == 4
        assert data["tools"] == row.digest
        assert all("expected_tools" not in turn for turn in data["result"]["turns"])
        again = decode_result(text, ToolsLookup({row.digest: row.tools}.get))
        assert again == stored
        assert again.result is not None
        assert again.result.model_dump_json() == stored.result.model_dump_json()
        # Smaller than the self-contained row by the tools it leaves out.
        assert len(text) < len(encode_result(stored))
        assert json.loads(encode_result(stored))["v"] == SELF_CONTAINED_FORMAT
        with pytest.raises(ValueError, match="no table given"):
            decode_result(text)
        with pytest.raises(ValueError, match="not stored"):
            decode_result(text, ToolsLookup({}.get))
    # Three references x one, two or three turns: one list each, the same digest for
    # the same list encoded by another process (content-addressed).
    digests = {tools.of(s.result).digest for s in RESULTS if s.result is not None}  # type: ignore[union-attr]
    assert len(digests) == 9
    other = ReferenceTools()
    assert {other.of(s.result).digest for s in RESULTS if s.result is not None} == digests  # type: ignore[union-attr]


def test_a_result_checking_no_tools_stays_format_3() -> None:
    conversation = Conversation(id="free", turns=(Turn(query="hi", answer="hello"),))
    result = Evaluator().evaluate(conversation, None)
    assert ReferenceTools().of(result) is None
    text = encode_result(StoredResult(conversation, result, 0))
    assert json.loads(text)["v"] == SELF_CONTAINED_FORMAT


def test_sqlite_api_reads_format_4_rows_as_it_read_format_3(tmp_path: Path) -> None:
    before = _self_contained(StateStore(tmp_path / "before.sqlite"))
    after = StateStore(tmp_path / "after.sqlite")
    for store in (before, after):
        store.open()
        asyncio.run(_put(store, RESULTS))
    try:
        old_rows = before.reader.execute("SELECT view FROM results").fetchall()
        new_rows = after.reader.execute("SELECT view FROM results").fetchall()
        assert _formats(old_rows) == [3]
        assert _formats(new_rows) == [4]
        assert sum(len(t) for (t,) in new_rows) < sum(len(t) for (t,) in old_rows)
        (tables,) = after.reader.execute("SELECT count(*) FROM reference_tools").fetchone()
        assert tables == 9  # each list once, however many rows name it
        assert before.reader.execute("SELECT count(*) FROM reference_tools").fetchone() == (0,)
        want = _views(before.results)
        assert _views(after.results) == want
        assert _listed(after.results) == _listed(before.results)
    finally:
        before.close()
        after.close()
    # Cold: a new process reads the tools from the file, not from its own encoder.
    again = StateStore(tmp_path / "after.sqlite")
    again.open()
    try:
        assert _views(again.results) == want
    finally:
        again.close()


def test_a_file_of_schema_5_is_upgraded_and_its_format_3_rows_still_read(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.sqlite"
    old = _self_contained(StateStore(path))
    old.open()
    asyncio.run(_put(old, RESULTS[:12]))
    want = _views_of(old, RESULTS[:12])
    old.close()
    with sqlite3.connect(path) as conn:  # what schema version 5 had
        conn.execute("DROP TABLE reference_tools")
        conn.execute("ALTER TABLE outbox DROP COLUMN tools")
        conn.execute("UPDATE meta SET value='5' WHERE key='schema_version'")
    store = StateStore(path)
    store.open()
    try:
        assert store.reader.execute(
            "SELECT value FROM meta WHERE key='schema_version'"
        ).fetchone() == (str(SCHEMA_VERSION),)
        assert _views_of(store, RESULTS[:12]) == want
        # New results in the same file: format 4 beside the format 3 rows.
        asyncio.run(_put(store, RESULTS[12:]))
        rows = store.reader.execute("SELECT view FROM results").fetchall()
        assert _formats(rows) == [3, 4]
        assert _views(store.results) == _views_of_fresh(tmp_path)
    finally:
        store.close()


def _views_of(store: StateStore, results: list[StoredResult]) -> dict[str, str]:
    out = {}
    for s in results:
        got = store.results.get_result(s.conversation.id)
        assert got is not None
        out[s.conversation.id] = json.dumps(stored_view_json(got), ensure_ascii=False)
    return out


def _views_of_fresh(tmp_path: Path) -> dict[str, str]:
    """Every result stored in format 3 in a file of its own (the reference answer)."""
    store = _self_contained(StateStore(tmp_path / "reference.sqlite"))
    store.open()
    try:
        asyncio.run(_put(store, RESULTS))
        return _views(store.results)
    finally:
        store.close()


# ---------------------------------------------------------------- PostgreSQL


async def _forward(store: StateStore, pg: PostgresResults) -> None:
    forwarder = ResultsForwarder(store, pg, batch_size=7)
    await forwarder.start()
    await _put(store, RESULTS)
    while await forwarder.forward_once():
        pass
    assert forwarder.backlog == 0
    await forwarder.shutdown()


def _forwarding(path: Path) -> StateStore:
    store = StateStore(path)
    store.open()
    return store


@pytest.mark.system
@pytest.mark.xdist_group("postgres")
@pytest.mark.timeout(600)
def test_postgres_api_reads_format_4_rows_as_it_read_format_3(
    tmp_path: Path, postgres_url: str
) -> None:
    before_file = _self_contained(_forwarding(tmp_path / "before.sqlite"))
    after_file = _forwarding(tmp_path / "after.sqlite")
    pg = PostgresResults(postgres_url)
    try:
        # The branch before: format 3 rows, forwarded through the outbox.
        asyncio.run(_forward(before_file, pg))
        pg.open()
        want, listed = _views(pg), _listed(pg)
        assert want == _views_of_fresh(tmp_path)
        # The same results again (same revisions: they replace the rows) in format 4.
        asyncio.run(_forward(after_file, pg))
        with psycopg.connect(postgres_url) as conn:
            rows = conn.execute("SELECT view FROM results").fetchall()
            assert _formats(rows) == [4]
            assert conn.execute("SELECT count(*) FROM reference_tools").fetchone() == (9,)
        cold = PostgresResults(postgres_url)  # a replica that encoded none of them
        cold.open()
        try:
            assert _views(cold) == want
            assert _listed(cold) == listed
        finally:
            cold.close()
    finally:
        pg.close()
        before_file.close()
        after_file.close()


@pytest.mark.system
@pytest.mark.xdist_group("postgres")
@pytest.mark.timeout(600)
def test_a_version_2_database_is_upgraded_and_its_rows_still_read(
    tmp_path: Path, postgres_url: str
) -> None:
    old_file = _self_contained(_forwarding(tmp_path / "old.sqlite"))
    pg = PostgresResults(postgres_url)
    try:
        asyncio.run(_forward(old_file, pg))
        pg.open()
        want = _views(pg)
    finally:
        pg.close()
        old_file.close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:  # what version 2 had
        conn.execute("DROP TABLE reference_tools")
        conn.execute("UPDATE tracepass_meta SET value='2' WHERE key='schema_version'")
    again = PostgresResults(postgres_url)
    again.open()
    new_file = _forwarding(tmp_path / "new.sqlite")
    try:
        assert _views(again) == want
        with psycopg.connect(postgres_url) as conn:
            version = conn.execute(
                "SELECT value FROM tracepass_meta WHERE key='schema_version'"
            ).fetchone()
        assert version == (str(PG_SCHEMA_VERSION),) == ("3",)
        asyncio.run(_forward(new_file, again))  # format 4 into the upgraded database
        again.open()  # (the forwarder's shutdown closed it)
        assert _views(again) == want
    finally:
        again.close()
        new_file.close()
