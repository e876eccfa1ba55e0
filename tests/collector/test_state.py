"""SQLite state: record codec, group commit, recovery data, purge, blobs, kill -9."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from _pipeline_support import END, MODEL, TOOL, StubEvaluator, rec, tid, turn_records

from tracepass.collector.normalize import normalize_request
from tracepass.collector.state import (
    StateError,
    StateStore,
    StoredResult,
    decode_record,
    encode_record,
)
from tracepass.evaluator.models import Conversation, ToolCall


def stored(key: str, revision: int) -> StoredResult:
    return StoredResult(Conversation(id=key), None, revision)


def test_record_codec_round_trips_every_field() -> None:
    r = rec(
        3,
        4,
        2,
        MODEL,
        start=5,
        end=9,
        conv="c",
        reference_id="set:r",
        agent_name="a",
        agent_version="2",
        service_name="svc",
        input_text="ünïcode q",
        output_text="a",
        tool_name=None,
        error="boom",
        requested_tool_calls=(ToolCall(name="x", arguments={"k": [1, 2]}, call_id="1"),),
        final_answer_uses_tools=True,
        attributes={"tracepass.conversation.turns": 2},
    )
    assert decode_record(encode_record(r)) == r
    t = rec(3, 5, 4, TOOL, tool_name="t", tool_arguments={"a": {"b": None}}, tool_result=[1, "x"])
    assert decode_record(encode_record(t)) == t
    e = rec(3, 6, None, END, attributes={"blob": b"\x01\x02"})
    assert decode_record(encode_record(e)).attributes == {"blob": "0102"}


async def test_group_commit_shares_transactions(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "s.sqlite", batch_max_delay_ms=20)
    store.open()
    try:
        writes = [
            store.write_spans(
                [(f"c{i}", r) for r in turn_records(i + 1, 10, f"c{i}", "q", "a", ["t"], 0)], 1.0
            )
            for i in range(50)
        ]
        await asyncio.gather(*writes)
        assert store.span_count() == 100
        assert store.commits < 50  # many concurrent requests per transaction
        # Duplicates (retries) are ignored by the primary key.
        await store.write_spans(
            [("c0", r) for r in turn_records(1, 10, "c0", "q", "a", ["t"], 0)], 2.0
        )
        assert store.span_count() == 100
    finally:
        store.close()


async def test_load_groups_by_conversation_with_result_metadata(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    store = StateStore(path)
    store.open()
    await store.write_spans([("a", r) for r in turn_records(1, 10, "a", "q", "x", ["t"], 0)], 5.0)
    await store.write_spans([("b", r) for r in turn_records(2, 20, "b", "q", "x", [], 0)], 7.0)
    await store.results.put_result(
        "a", revision=0, closed_at=6.0, n_spans=2, stored=stored("a", 0), evaluated_at=6.5
    )
    assert store.results.get_result("a") == stored("a", 0)
    # An older revision never overwrites a newer one.
    await store.results.put_result(
        "a", revision=3, closed_at=8.0, n_spans=2, stored=stored("a", 3), evaluated_at=9
    )
    await store.results.put_result(
        "a", revision=2, closed_at=7.0, n_spans=2, stored=stored("a", 2), evaluated_at=9
    )
    assert store.results.get_result("a") == stored("a", 3)
    store.close()

    store = StateStore(path)
    store.open()
    try:
        loaded = {c.key: c for c in store.load()}
        assert set(loaded) == {"a", "b"}
        assert loaded["a"].revision == 3
        assert loaded["a"].closed_at == 8.0
        assert loaded["b"].revision is None
        assert loaded["b"].last_seen == 7.0
        assert sorted(r.span_id for r in loaded["a"].records) == sorted(
            r.span_id for r in turn_records(1, 10, "a", "q", "x", ["t"], 0)
        )
        # Purge deletes spans of conversations evaluated before the cutoff, unless kept.
        assert await store.purge(10.0, keep={"a"}) == 0
        assert await store.purge(10.0) == 2
        assert {c.key for c in store.load()} == {"b"}
        assert store.results.get_result("a") == stored("a", 3)  # results outlive their spans
    finally:
        store.close()


async def test_blobs(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "s.sqlite")
    store.open()
    try:
        assert store.get_blob("agg") is None
        await asyncio.wrap_future(store.put_blob("agg", b"v1"))
        await asyncio.wrap_future(store.put_blob("agg", b"v2"))
        assert store.get_blob("agg") == b"v2"
    finally:
        store.close()


def test_wal_mode_and_bad_file(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "s.sqlite")
    store.open()
    store.close()
    mode = sqlite3.connect(tmp_path / "s.sqlite").execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StateError, match=r"bad\.sqlite: not a usable SQLite state file"):
        StateStore(bad).open()


CHILD = textwrap.dedent(
    """
    import asyncio, sys
    sys.path.insert(0, {support!r})
    from pathlib import Path
    from _pipeline_support import StubEvaluator, turn_records
    from tracepass.collector.config import StateConfig
    from tracepass.collector.pipeline import Pipeline

    async def main():
        p = Pipeline(StubEvaluator(), state=StateConfig(path=Path({path!r}), durability="batch",
                     batch_max_delay_ms=1.0))
        await p.start()
        i = 0
        while True:
            i += 1
            recs = turn_records(i, 10, f"conv-{{i % 7}}", "q", "a", ["t1", "t2"], t0=i)
            await p.ingest_records(recs)
            print("ACK", " ".join(f"{{r.trace_id}}:{{r.span_id}}" for r in recs), flush=True)

    asyncio.run(main())
    """
)


CHILD_REQUESTS = textwrap.dedent(
    """
    import asyncio, sys
    sys.path.insert(0, {support!r})
    from pathlib import Path
    from _pipeline_support import StubEvaluator, genai_request
    from tracepass.collector.config import StateConfig
    from tracepass.collector.pipeline import Pipeline

    async def main():
        p = Pipeline(StubEvaluator(), state=StateConfig(path=Path({path!r}), durability="batch",
                     batch_max_delay_ms=1.0))
        await p.start()
        i = 0
        while True:
            i += 1
            req = genai_request(i, 10, f"conv-{{i % 7}}", ["t1", "t2"], t0=i)
            await p.ingest(req)
            spans = req.resource_spans[0].scope_spans[0].spans
            print("ACK", " ".join(f"{{s.trace_id.hex()}}:{{s.span_id.hex()}}" for s in spans),
                  flush=True)

    asyncio.run(main())
    """
)


@pytest.mark.slow  # starts a process or a server
@pytest.mark.timeout(60)
@pytest.mark.parametrize("child", [CHILD, CHILD_REQUESTS], ids=["records", "requests"])
def test_acknowledged_spans_survive_kill_9(tmp_path: Path, child: str) -> None:
    path = tmp_path / "state.sqlite"
    script = tmp_path / "child.py"
    script.write_text(child.format(support=str(Path(__file__).parent), path=str(path)))
    proc = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    acked: set[tuple[str, str]] = set()
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            if line.startswith("ACK "):
                acked.update(tuple(x.split(":")) for x in line.split()[1:])  # type: ignore[misc]
            if len(acked) >= 600:
                break
        os.kill(proc.pid, signal.SIGKILL)  # mid-stream: writes are still in flight
    finally:
        proc.kill()
        proc.wait(timeout=120)
        stderr = proc.stderr.read() if proc.stderr else ""
    assert len(acked) >= 600, stderr
    store = StateStore(path)
    store.open()
    try:
        loaded = store.load(normalize_request)
        stored = store.span_ids() | {(r.trace_id, r.span_id) for c in loaded for r in c.records}
        assert acked <= stored, f"{len(acked - stored)} acknowledged spans lost"
        assert {c.key for c in loaded} <= {f"conv-{i}" for i in range(7)}
        assert all(r.trace_id != tid(0) for c in loaded for r in c.records)
    finally:
        store.close()


async def test_request_log_restart_merge_and_purge(tmp_path: Path) -> None:
    """`ingest(request)` stores one row per request; recovery re-normalizes it, follows
    trace merges, and purging a conversation deletes the rows nobody needs any more."""
    from _pipeline_support import Clock, genai_request

    from tracepass.collector.config import AssemblyConfig, StateConfig
    from tracepass.collector.pipeline import Pipeline

    def make(clock: Clock) -> Pipeline:
        return Pipeline(
            StubEvaluator(),
            assembly=AssemblyConfig(idle_timeout_s=60, retention_s=100),
            state=StateConfig(path=tmp_path / "s.sqlite", batch_max_delay_ms=0.0),
            clock=clock,
        )

    clock = Clock()
    p = make(clock)
    await p.start(background=False)
    # Trace 1: tool spans without a conversation id first (a trace-only buffer), then
    # the root naming conversation "a" (merges the buffer). Trace 2: conversation "b",
    # sharing a request with "a".
    await p.ingest(genai_request(1, 10, None, ["t1", "t2"], 0, root=False))
    both = genai_request(1, 10, "a", [], 0)
    both.MergeFrom(genai_request(2, 20, "b", ["t3"], 0))
    await p.ingest(both)
    await p.ingest(both)  # a retry: deduplicated
    assert p.store is not None
    assert p.store.request_count() == 3
    assert p.store.span_count() == 0  # nothing went through the per-span JSON rows
    held = p.assembler.held_spans
    await p.stop()  # batch durability: stop writes nothing more, the log has it all

    clock.t += 5
    p2 = make(clock)
    await p2.start(background=False)
    assert p2.assembler.held_spans == held == 5
    assert p2.assembler.is_open("a")
    assert p2.assembler.is_open("b")
    assert not p2.assembler.is_open(tid(1))
    snap = p2.assembler.snapshot("a")
    assert snap is not None
    assert sorted(r.tool_name or r.name for r in snap[0]) == ["invoke_agent bot", "t1", "t2"]
    # Both conversations idle out and are evaluated; after retention "a" and "b" are
    # purged and the request rows go with them.
    clock.t += 61
    await p2.process_due()
    assert len(p2.evaluator.calls) == 2  # type: ignore[attr-defined]
    clock.t += 101
    await p2.purge()
    assert p2.store is not None
    assert p2.store.request_count() == 0
    await p2.stop()

    # Third start: nothing left to recover, nothing re-evaluated.
    p3 = make(clock)
    await p3.start(background=False)
    assert p3.assembler.held_spans == 0
    await p3.stop()


async def test_request_log_keeps_rows_needed_by_another_conversation(tmp_path: Path) -> None:
    from _pipeline_support import Clock, genai_request

    from tracepass.collector.config import AssemblyConfig, StateConfig
    from tracepass.collector.pipeline import Pipeline

    clock = Clock()

    def make() -> Pipeline:
        return Pipeline(
            StubEvaluator(),
            assembly=AssemblyConfig(idle_timeout_s=60, retention_s=100),
            state=StateConfig(path=tmp_path / "s.sqlite", batch_max_delay_ms=0.0),
            clock=clock,
        )

    p = make()
    await p.start(background=False)
    both = genai_request(1, 10, "a", ["t1"], 0)
    both.MergeFrom(genai_request(2, 20, "b", ["t2"], 0))
    await p.ingest(both)
    clock.t += 61
    await p.process_due()  # both evaluated
    clock.t += 50
    await p.ingest(genai_request(2, 30, "b", ["late"], 0, root=False))  # "b" reopens
    clock.t += 60
    await p.purge()  # "a" past retention, "b" re-opened: the shared row must stay
    assert p.store is not None
    assert p.store.request_count() == 2
    await p.stop()
    p2 = make()
    await p2.start(background=False)
    snap = p2.assembler.snapshot("b")
    assert snap is not None
    assert snap[1:] == (1, False)  # retained after its revision, records on disk only
    assert p2.store is not None
    found = await p2.store.spans.read_back(["a", "b"], p2.intake.normalize)
    assert len(found["b"]) == 3  # root + t2 from the shared request + the late span
    assert p2.assembler.snapshot("a") is None  # purged: not resurrected from that row
    assert found["a"] == []
    await p2.stop()


async def test_results_beyond_the_memory_cache_are_read_from_the_state_file(
    tmp_path: Path,
) -> None:
    """With a state file, memory keeps only the newest results (fewer objects for the
    GC to scan); older ones come back from the file, unchanged."""
    from _pipeline_support import Clock, genai_request

    from tracepass.collector.config import AssemblyConfig, StateConfig
    from tracepass.collector.pipeline import Pipeline

    clock = Clock()
    p = Pipeline(
        StubEvaluator(),
        assembly=AssemblyConfig(idle_timeout_s=60),
        state=StateConfig(path=tmp_path / "s.sqlite", batch_max_delay_ms=0.0),
        clock=clock,
        result_cache_size=2,
    )
    await p.start(background=False)
    try:
        for i in range(5):
            await p.ingest(genai_request(i + 1, 10 * (i + 1), f"c{i}", ["t"], 0))
        clock.t += 61
        await p.process_due()
        assert len(p.results._cache) == 2  # the two newest
        for i in range(5):
            got = p.latest_result(f"c{i}")
            assert got is not None
            assert got.conversation.id == f"c{i}"
            assert got.result is not None
    finally:
        await p.stop()


async def test_a_failing_op_is_undone_alone_and_its_neighbours_commit(tmp_path: Path) -> None:
    """Ops of one group transaction run without a savepoint each (a savepoint costs more
    than a stored result's inserts); when one raises, the batch runs again with one per
    op, so the failing op leaves nothing behind and the others commit."""
    store = StateStore(tmp_path / "s.sqlite", batch_max_delay_ms=50)
    store.open()
    runs: list[str] = []

    def good(name: str) -> Callable[[sqlite3.Connection], str]:
        def op(conn: sqlite3.Connection) -> str:
            runs.append(name)
            conn.execute("INSERT INTO kv VALUES (?, x'01')", (name,))
            return name

        return op

    def half_then_fail(conn: sqlite3.Connection) -> None:
        runs.append("bad")
        conn.execute("INSERT INTO kv VALUES ('half', x'01')")
        raise RuntimeError("op failed half-way")

    try:
        commits = store.commits
        first, bad, last = (
            store.run(good("a")),
            store.run(half_then_fail),
            store.run(good("b")),
        )
        outcomes = await asyncio.gather(first, bad, last, return_exceptions=True)
        assert outcomes[0] == "a"
        assert outcomes[2] == "b"
        assert isinstance(outcomes[1], RuntimeError)
        assert store.commits == commits + 1  # one transaction, run twice
        assert runs == ["a", "bad", "a", "bad", "b"]
        assert store.get_blob("a") == b"\x01"
        assert store.get_blob("b") == b"\x01"
        assert store.get_blob("half") is None
        runs.clear()
        assert await store.run(good("c")) == "c"  # the next batch runs plainly again
        assert runs == ["c"]
    finally:
        store.close()
