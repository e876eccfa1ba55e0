"""Result row format 4: each reference's expected tools are stored once, in the
`reference_tools` table, not in every result row (SQLite and PostgreSQL alike), and
the conversation is written without its None values (not compared with defaults).

What must hold: the API reads the same JSON from a format-4 row as from the format-3
row the code before wrote for the same result (conversation view and list, both
stores, read back cold by a fresh process-side cache); format-3 rows in a file or
database keep reading; files and databases of the schema before are upgraded; a row
naming a list the store lacks is an error, never a result without its tools."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import typing
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pydantic import BaseModel

from tracepass.collector.api.pooled import pooled_snapshots
from tracepass.collector.api.read_model import ReadModel
from tracepass.collector.api.views import stored_view_json
from tracepass.collector.pipeline.forwarding import ResultsForwarder
from tracepass.collector.state import ResultWrite, StateStore, StoredResult
from tracepass.collector.state.codec import RESULT_FORMAT, decode_result, encode_result
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


_WITHOUT_TURN_IO = {"turns": {"__all__": {"query", "answer", "tool_calls"}}}


def _format_3(stored: StoredResult) -> str:
    """The row the code before format 4 wrote (its `encode_result`, verbatim in effect:
    the results here share their conversation's turns and have no non-finite floats)."""
    assert stored.result is not None
    conversation = stored.conversation.model_dump_json(exclude_defaults=True)
    body = stored.result.model_dump_json(exclude=_WITHOUT_TURN_IO, exclude_defaults=True)
    return (
        f'{{"v":3,"revision":{stored.revision},"turn_io":1,'
        f'"conversation":{conversation},"result":{body}}}'
    )


def _rewrite_as_format_3(execute: Any, placeholder: str = "?") -> None:
    """Every stored row replaced by the format-3 row of the same result (as if the
    code before had stored them; the index columns are the same)."""
    for s in RESULTS:
        execute(
            f"UPDATE results SET view={placeholder} WHERE conv_key={placeholder}",
            (_format_3(s), s.conversation.id),
        )


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
        # Without a table the row carries the tools itself; both read back the same.
        inline = encode_result(stored)
        assert "tools" not in json.loads(inline)
        assert decode_result(inline) == stored
        assert decode_result(_format_3(stored)) == stored
        assert len(text) < len(inline)
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


def test_a_result_checking_no_tools_names_no_row() -> None:
    conversation = Conversation(id="free", turns=(Turn(query="hi", answer="hello"),))
    result = Evaluator().evaluate(conversation, None)
    assert ReferenceTools().of(result) is None
    stored = StoredResult(conversation, result, 0)
    assert decode_result(encode_result(stored)) == stored


def _none_is_the_only_default(model: type[BaseModel], seen: set[type[BaseModel]]) -> None:
    if model in seen:
        return
    seen.add(model)
    for name, field in model.model_fields.items():
        allowed = type(None) in typing.get_args(field.annotation)
        if allowed and not field.exclude:
            default = field.get_default(call_default_factory=True)
            assert default is None, f"{model.__name__}.{name}: None allowed, default {default!r}"
        stack = [field.annotation]
        while stack:
            t = stack.pop()
            if isinstance(t, type) and issubclass(t, BaseModel):
                _none_is_the_only_default(t, seen)
            stack.extend(typing.get_args(t))


def test_leaving_out_nones_keeps_every_conversation_field() -> None:
    """Format 4 writes the conversation with `exclude_none`: that keeps the data only
    while no field of its models allows None with another default (or with none:
    required). A model change that breaks this must change the encoding too."""
    seen: set[type[BaseModel]] = set()
    _none_is_the_only_default(Conversation, seen)
    assert {"Turn", "ToolCall", "TimelineSpan", "Usage", "Latency"} <= {m.__name__ for m in seen}
    # None inside tool arguments and results (untyped values) is kept.
    call = ToolCall(name="t", arguments={"a": None, "b": {"c": None}}, result=[None, {"d": None}])
    conversation = Conversation(id="n", turns=(Turn(query=None, tool_calls=(call,)),))
    stored = StoredResult(conversation, None, 0)
    assert decode_result(encode_result(stored)) == stored


def test_sqlite_api_reads_format_4_rows_as_it_read_format_3(tmp_path: Path) -> None:
    before = StateStore(tmp_path / "before.sqlite")
    after = StateStore(tmp_path / "after.sqlite")
    for store in (before, after):
        store.open()
        asyncio.run(_put(store, RESULTS))
    before.submit(lambda conn: _rewrite_as_format_3(conn.execute)).result()
    try:
        old_rows = before.reader.execute("SELECT view FROM results").fetchall()
        new_rows = after.reader.execute("SELECT view FROM results").fetchall()
        assert _formats(old_rows) == [3]
        assert _formats(new_rows) == [4]
        (tables,) = after.reader.execute("SELECT count(*) FROM reference_tools").fetchone()
        assert tables == 9  # each list once, however many rows name it
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
    reference = StateStore(tmp_path / "reference.sqlite")
    reference.open()
    asyncio.run(_put(reference, RESULTS))
    want = _views(reference.results)
    reference.close()
    path = tmp_path / "state.sqlite"
    old = StateStore(path)
    old.open()
    asyncio.run(_put(old, RESULTS[:12]))
    old.submit(lambda conn: _rewrite_as_format_3(conn.execute)).result()
    old.close()
    with sqlite3.connect(path) as conn:  # what schema version 5 had
        conn.execute("DROP TABLE reference_tools")
        conn.execute("ALTER TABLE outbox DROP COLUMN tools")
        conn.execute("UPDATE meta SET value='5' WHERE key='schema_version'")
    store = StateStore(path)
    store.open()
    try:
        version = store.reader.execute("SELECT value FROM meta WHERE key='schema_version'")
        assert version.fetchone() == (str(SCHEMA_VERSION),) == ("6",)
        # New results in the same file: format 4 beside the format 3 rows.
        asyncio.run(_put(store, RESULTS[12:]))
        rows = store.reader.execute("SELECT view FROM results").fetchall()
        assert _formats(rows) == [3, 4]
        assert _views(store.results) == want
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


def _pg_rewrite_as_format_3(url: str) -> None:
    with psycopg.connect(url) as conn, conn.transaction():
        _rewrite_as_format_3(conn.execute, "%s")


@pytest.mark.system
@pytest.mark.xdist_group("postgres")
@pytest.mark.timeout(600)
def test_postgres_api_reads_format_4_rows_as_it_read_format_3(
    tmp_path: Path, postgres_url: str
) -> None:
    before_file = _forwarding(tmp_path / "before.sqlite")
    after_file = _forwarding(tmp_path / "after.sqlite")
    local = _forwarding(tmp_path / "local.sqlite")
    pg = PostgresResults(postgres_url)
    try:
        # As the code before stored them: format 3 rows.
        asyncio.run(_forward(before_file, pg))
        _pg_rewrite_as_format_3(postgres_url)
        pg.open()
        want, listed = _views(pg), _listed(pg)
        asyncio.run(_put(local, RESULTS))
        assert want == _views(local.results)  # and as the state file answers
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
        local.close()


@pytest.mark.system
@pytest.mark.xdist_group("postgres")
@pytest.mark.timeout(600)
def test_a_version_2_database_is_upgraded_and_its_rows_still_read(
    tmp_path: Path, postgres_url: str
) -> None:
    old_file = _forwarding(tmp_path / "old.sqlite")
    pg = PostgresResults(postgres_url)
    try:
        asyncio.run(_forward(old_file, pg))
        _pg_rewrite_as_format_3(postgres_url)
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
