"""Issue 33 (the third attack), memory a sender controls:

2. The OTLP/JSON receiver's key-normalization memo kept every unknown key: 80 requests
   with unique 400 KB keys took a `tracepass serve` from 113 to 730 MB of RSS, never
   released. Now only short keys are memoized, a bounded number of them: measured on
   the real server (VmRSS), after a warm-up with one repeated key of the same size.
3. The price lookup cached every model name a span sent (~1 MB per span with a unique
   1 MB name): names past `MAX_MODEL_CHARS` are not looked up (traced in-process).
4. Reference-candidate mining kept unique long first queries bounded by count only
   (+~1 MB per conversation with a 500 KB query): the task key has a fixed size and the
   miner a byte budget (traced in-process).
15. The failure-mode index remembered each agent version's signatures for good: the
   cache holds at most `VERSION_CACHE_ENTRIES` versions (counted as evicted).

`TRACEPASS_MEMO_REQUESTS` (default 120; `make reliability`: 600) sets how many unique
400 KB keys the receiver test sends.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest
from _serve import Serve, write_config

from tracepass.collector.api.failure_modes import failure_modes
from tracepass.collector.receiver import decode_json_bytes
from tracepass.collector.state import ModeScope, StateStore, StoredResult
from tracepass.collector.state.failure_index import VERSION_CACHE_ENTRIES
from tracepass.evaluator.bounded_cache import eviction_counts
from tracepass.evaluator.models import (
    Conversation,
    ExpectedTool,
    Reference,
    ReferenceTurn,
    ToolCall,
    Turn,
)
from tracepass.evaluator.pricing import MAX_MODEL_CHARS, RESOLVED_ENTRIES, PriceBook, TokenUsage
from tracepass.evaluator.references.candidate_mining import (
    MAX_TASK_KEY_CHARS,
    CandidateMiner,
    task_key,
)
from tracepass.evaluator.scoring.evaluator import Evaluator

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]  # starts a process or a server

REQUESTS = int(os.environ.get("TRACEPASS_MEMO_REQUESTS", "120"))
KEY_BYTES = 400_000


def _request(key: str) -> bytes:
    """One OTLP/JSON span carrying `key` as an unknown field (the slow path: its keys
    are not all known camelCase names)."""
    span = {
        "traceId": "0" * 31 + "1",
        "spanId": "0" * 15 + "1",
        "name": "invoke_agent memo",
        "startTimeUnixNano": "1",
        "endTimeUnixNano": "2",
        key: 1,
    }
    doc = {"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}
    return json.dumps(doc).encode()


def _long_key(i: int) -> str:
    head = f"k{i}_"
    return head + "x_" * ((KEY_BYTES - len(head)) // 2)


def test_unique_long_json_keys_keep_rss_bounded(tmp_path: Path) -> None:
    serve = Serve(write_config(tmp_path, tmp_path / "state.sqlite"))
    try:
        headers = {"Content-Type": "application/json"}

        def post(body: bytes) -> None:
            conn_status = _post(serve, body, headers)
            assert conn_status in (200, 400), conn_status

        same = _request(_long_key(-1))
        for _ in range(40):  # the allocator's high-water mark for requests of this size
            post(same)
        before = serve.rss_mb()
        for i in range(REQUESTS):
            post(_request(_long_key(i)))
        after = serve.rss_mb()
    finally:
        serve.stop()
    sent_mb = REQUESTS * KEY_BYTES / 1e6
    # Remembering them cost at least the keys themselves (twice: key and camelCase).
    assert after - before < sent_mb / 4, (before, after, sent_mb)


def _post(serve: Serve, body: bytes, headers: dict[str, str]) -> int:
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", serve.port, timeout=60)
    try:
        conn.request("POST", "/v1/traces", body=body, headers=headers)
        resp = conn.getresponse()
        resp.read()
        return resp.status
    finally:
        conn.close()


def _traced(run: Callable[[], object], warm: Callable[[], object] | None = None) -> int:
    """Bytes still allocated (tracemalloc) after `run()`, garbage collected. With `warm`,
    tracing starts before it (so what `run` frees of it is seen) and the growth counts
    from its end: what bounded caches already full replace is not growth."""
    gc.collect()
    tracemalloc.start()
    try:
        if warm is not None:
            warm()
            gc.collect()
        base = tracemalloc.get_traced_memory()[0]
        run()
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()


def test_the_json_key_memo_is_bounded_in_process() -> None:
    keys = [_long_key(i) for i in range(60)]
    bodies = [_request(k) for k in keys]
    del keys

    def run() -> None:
        for body in bodies:
            decode_json_bytes(body)

    kept = _traced(run)
    assert kept < len(bodies) * KEY_BYTES / 10, kept


def test_unique_long_model_names_do_not_grow_the_price_cache() -> None:
    book = PriceBook()
    book.price("gpt-4o", TokenUsage(10, 10))  # the library loaded, its caches warm
    names = [f"{i}-" + "m" * 1_000_000 for i in range(30)]

    def run() -> None:
        for name in names:
            priced = book.price(name, TokenUsage(10, 10))
            assert priced.cost_usd is None

    kept = _traced(run)
    assert kept < 1_000_000, kept  # one name is 1 MB: none was kept
    assert len(names[0]) > MAX_MODEL_CHARS


def test_unique_short_model_names_keep_the_price_caches_bounded() -> None:
    """Names under `MAX_MODEL_CHARS` reach the library: its own memos kept every one
    (genai-prices' `_provider_misses`: ~330 bytes per unknown name, for good)."""
    book = PriceBook()
    book.price("gpt-4o", TokenUsage(10, 10))  # loads the library (~90 s under tracemalloc)

    def names(start: int, n: int) -> None:
        for i in range(start, start + n):
            assert book.price(f"{i}-" + "m" * 200, TokenUsage(10, 10)).cost_usd is None

    # The warm-up fills our rates cache (RESOLVED_ENTRIES); then 2,000 more names.
    kept = _traced(lambda: names(10_000, 2_000), warm=lambda: names(0, RESOLVED_ENTRIES + 100))
    # Before: ≥ 660 KB for these 2,000 names; now every cache is full and stays so (the
    # library's memos, emptied past LIBRARY_MEMO_ENTRIES, vary by at most ~85 KB).
    assert kept < 200_000, kept
    assert eviction_counts().get("price_library", 0) > 0


def _conversation(i: int, query: str) -> Conversation:
    return Conversation(
        id=f"c{i}",
        agent_name="travel",
        agent_version="1",
        turns=(Turn(query=query, answer="fine"),),
        complete=True,
    )


def test_unique_long_queries_keep_candidate_mining_bounded() -> None:
    budget = 8_000_000
    miner = CandidateMiner(max_bytes=budget)
    conversations = [_conversation(i, f"{i} " + "q" * 500_000) for i in range(60)]

    def run() -> None:
        for c in conversations:
            miner.add(c, None)

    kept = _traced(run)
    # 60 × 500 KB queries offered, at most the budget (plus the fixed-size keys) kept.
    assert miner.bytes <= budget
    assert miner.dropped_tasks > 0
    assert kept < 2 * budget, kept
    assert all(len(k) <= MAX_TASK_KEY_CHARS + 33 for k in miner._tasks)
    # Closing a long task by its query reaches the same key.
    last = conversations[-1].turns[0].query
    miner.close(last)
    assert task_key(last) not in miner._tasks


def _failing(i: int, version: str, side: str = "window") -> Conversation:
    calls = (ToolCall(name="book", arguments={"side": side}),)
    return Conversation(
        id=f"f{i}",
        agent_name="travel",
        agent_version=version,
        turns=(Turn(query="book a seat", answer="booked", tool_calls=calls),),
    )


_SEAT = Reference(
    id="seat",
    turns=(
        ReferenceTurn(
            query="book a seat",
            expected_tools=(ExpectedTool(name="book", arguments={"side": "aisle"}),),
        ),
    ),
)


def _store(path: Path, tracked: int) -> StateStore:
    store = StateStore(path)
    store.results.failure_modes.counters.tracked_versions = tracked
    store.open()
    return store


def _put(store: StateStore, conversations: list[Conversation], t0: float = 1.7e9) -> None:
    evaluator = Evaluator()

    async def put_all() -> None:
        for n, conv in enumerate(conversations):
            result = evaluator.evaluate(conv, _SEAT, reference_set="seats")
            at = t0 + n
            await store.results.put_result(
                conv.id,
                revision=0,
                closed_at=at,
                n_spans=2,
                stored=StoredResult(conv, result, 0),
                evaluated_at=at,
            )

    asyncio.run(put_all())


def test_failure_mode_counters_keep_a_bounded_number_of_versions(tmp_path: Path) -> None:
    """Item 15: a new failing version per conversation cost ~4 KB for good (the
    counters' cells, the per-version sets): past the tracked versions it costs nothing
    lasting."""
    tracked = 100
    store = _store(tmp_path / "state.sqlite", tracked)
    try:
        # Past the tracked versions and the per-version caches' 1,024 entries.
        first = [_failing(i, f"v{i}") for i in range(tracked + VERSION_CACHE_ENTRIES)]
        more = [_failing(len(first) + i, f"w{i}") for i in range(1000)]
        kept = _traced(lambda: _put(store, more, t0=1.8e9), warm=lambda: _put(store, first))
        index = store.results.failure_modes
        assert index.counters.folded_versions >= 1000
        assert len(index._known) <= VERSION_CACHE_ENTRIES
    finally:
        store.close()
    # Before: ~4 KB per version (4 MB for these 1,000); the table rows are on disk.
    assert kept < 1000 * 600, kept


def test_folded_versions_answer_as_tracked_ones(tmp_path: Path) -> None:
    """The same results in a store that tracks every version and one that folds all
    but 3: every failure-mode answer is equal (the folded ones are read from the
    table)."""
    conversations = []
    for i in range(60):
        side = ("window", "middle", "floor")[i % 3] if i % 4 else "aisle"
        conversations.append(_failing(i, f"v{i % 12}", side))
    answers = []
    for tracked, name in ((1000, "all.sqlite"), (3, "folded.sqlite")):
        store = _store(tmp_path / name, tracked)
        try:
            _put(store, conversations)
            assert (store.results.failure_modes.counters.folded_versions > 0) == (tracked == 3)
            queries: list[dict[str, str]] = [{}, {"agent_name": "travel"}]
            for v in range(12):
                queries.append({"agent_name": "travel", "agent_version": f"v{v}"})
                queries.append({"agent_version": f"v{v}", "since": "1700000010"})
            answers.append([failure_modes(store, q) for q in queries])
            # The failures of every version together are exact from the counters too.
            index = store.results.failure_modes
            assert index.counters.totals(ModeScope("travel"))[""][0] == 45
        finally:
            store.close()
        # Re-opened (the counters rebuilt from the tables): the same answers.
        store = _store(tmp_path / name, tracked)
        try:
            assert [failure_modes(store, q) for q in queries] == answers[-1]
        finally:
            store.close()
    assert answers[0] == answers[1]
