"""Reference candidates over a shared results store (`ReferenceCandidates(shared=…)`):
mined from the store's unreferenced results instead of this replica's evaluations, at
most every `SHARED_REFRESH_S`, approved tasks staying closed across a rebuild, and a
store that cannot be read failing the request (503) without losing the last list.
The two-replica run on a real PostgreSQL is tests/e2e/test_replicas_shared_triage.py."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tracepass.collector.api import candidates as candidates_mod
from tracepass.collector.api.candidates import ReferenceCandidates
from tracepass.collector.state import StoredResult
from tracepass.evaluator.models import Conversation, ConversationResult, Outcome, ToolCall, Turn
from tracepass.evaluator.references.candidate_mining import CandidateMiner, task_key


def _stored(cid: str, query: str = "Plan a trip to Bergen") -> StoredResult:
    conv = Conversation(
        id=cid,
        agent_name="trips",
        turns=(
            Turn(
                query=query,
                answer="Take the 08:25 train.",
                tool_calls=(ToolCall(name="search_trains", arguments={"to": "Bergen"}),),
            ),
        ),
    )
    result = ConversationResult(
        conversation_id=cid, reference_id=None, correct=False, outcome=Outcome.UNSCORED
    )
    return StoredResult(conv, result, 1)


class Store:
    """What the shared store's `unreferenced_results` returns, and how often it ran."""

    def __init__(self) -> None:
        self.rows: list[StoredResult] = []
        self.reads = 0
        self.down = False

    def __call__(self, limit: int) -> list[StoredResult]:
        self.reads += 1
        if self.down:
            raise LookupError("results database postgresql://db unreachable")
        return self.rows[-limit:]


def test_the_shared_store_is_mined_not_this_replicas_evaluations(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(candidates_mod, "SHARED_REFRESH_S", 0.0)
    store = Store()
    cands = ReferenceCandidates(CandidateMiner(3), tmp_path, shared=store)
    own = _stored("own")
    assert own.result is not None
    assert not cands.observe(own.result, own.conversation)  # comes back from the store
    store.rows = [_stored(f"other-{i}") for i in range(2)]
    asyncio.run(cands.refresh())
    assert cands.listing()["candidates"] == []  # 2 < 3
    store.rows.append(_stored("own"))
    asyncio.run(cands.refresh())
    (listed,) = cands.listing()["candidates"]
    assert sorted(listed["conversation_ids"]) == ["other-0", "other-1", "own"]
    assert listed["tools"] == ["search_trains"]
    # Two replicas reading the same rows list the same candidates.
    twin = ReferenceCandidates(CandidateMiner(3), tmp_path, shared=store)
    asyncio.run(twin.refresh())
    assert twin.listing() == cands.listing()


def test_reads_are_rate_limited_and_closed_tasks_stay_closed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    store = Store()
    store.rows = [_stored(f"c{i}") for i in range(3)]
    cands = ReferenceCandidates(CandidateMiner(3), tmp_path, shared=store)

    async def twice() -> None:
        await asyncio.gather(cands.refresh(), cands.refresh())
        await cands.refresh()

    asyncio.run(twice())
    assert store.reads == 1  # within SHARED_REFRESH_S: one read for all three asks
    (candidate,) = cands.proposals()
    status, body = cands.approve(candidate.id, None)
    assert status == 201, body
    monkeypatch.setattr(candidates_mod, "SHARED_REFRESH_S", 0.0)
    store.rows.append(_stored("c3"))
    asyncio.run(cands.refresh())
    assert store.reads == 2
    assert task_key(candidate.query) in cands.miner.closed
    assert cands.listing()["candidates"] == []  # approved: not mined again


def test_an_unreadable_store_fails_the_request_and_keeps_the_last_list(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(candidates_mod, "SHARED_REFRESH_S", 0.0)
    store = Store()
    store.rows = [_stored(f"c{i}") for i in range(3)]
    cands = ReferenceCandidates(CandidateMiner(3), tmp_path, shared=store)
    asyncio.run(cands.refresh())
    before = cands.listing()
    store.down = True
    with pytest.raises(LookupError, match="unreachable"):
        asyncio.run(cands.refresh())
    assert cands.listing() == before
