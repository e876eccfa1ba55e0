"""SQLite state: record codec, group commit, recovery data, purge, blobs, kill -9."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _pipeline_support import END, MODEL, TOOL, rec, tid, turn_records

from tracepass.collector.state import StateError, StateStore, decode_record, encode_record
from tracepass.evaluator.models import ToolCall


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
    await store.put_result(
        "a", revision=0, closed_at=6.0, n_spans=2, view={"conversation_id": "a"}, evaluated_at=6.5
    )
    assert store.get_view("a") == {"conversation_id": "a"}
    # An older revision never overwrites a newer one.
    await store.put_result("a", revision=3, closed_at=8.0, n_spans=2, view={"r": 3}, evaluated_at=9)
    await store.put_result("a", revision=2, closed_at=7.0, n_spans=2, view={"r": 2}, evaluated_at=9)
    assert store.get_view("a") == {"r": 3}
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
        assert store.get_view("a") == {"r": 3}  # results outlive their spans
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


@pytest.mark.timeout(60)
def test_acknowledged_spans_survive_kill_9(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(support=str(Path(__file__).parent), path=str(path)))
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
        proc.wait(timeout=10)
        stderr = proc.stderr.read() if proc.stderr else ""
    assert len(acked) >= 600, stderr
    store = StateStore(path)
    store.open()
    try:
        stored = store.span_ids()
        assert acked <= stored, f"{len(acked - stored)} acknowledged spans lost"
        loaded = store.load()
        assert {c.key for c in loaded} <= {f"conv-{i}" for i in range(7)}
        assert all(r.trace_id != tid(0) for c in loaded for r in c.records)
    finally:
        store.close()
