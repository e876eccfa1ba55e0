"""Failure modes over a real SQLite state file: the signatures of real evaluations, the
index kept on insert (counts, shares, examples, `new` against the previous version, the
`other` bound, re-evaluation replacing rows), the `failure_mode=` list filter, and the
signature bounds."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracepass.collector.api.failure_modes import failure_modes
from tracepass.collector.api.params import ParamError
from tracepass.collector.api.read_model import ReadModel
from tracepass.collector.state import StateStore, StoredResult
from tracepass.evaluator.models import (
    Conversation,
    ExpectedTool,
    GraderSpec,
    Reference,
    ReferenceTurn,
    ToolCall,
    Turn,
)
from tracepass.evaluator.scoring.evaluator import Evaluator
from tracepass.evaluator.scoring.explain import failure_analysis
from tracepass.evaluator.scoring.failure_signatures import (
    MAX_PATH_DEPTH,
    MAX_SIGNATURE_CHARS,
    argument_path,
    bound,
)
from tracepass.evaluator.stats.rolling import RollingConfig

T0 = 1_700_000_000.0
REFERENCE = Reference(
    id="flights",
    turns=(
        ReferenceTurn(
            query="flights to Rome?",
            graders=(GraderSpec.model_validate({"type": "contains", "keywords": ["Rome"]}),),
            expected_tools=(
                ExpectedTool(name="search_flights", arguments={"to": "Rome", "date": "07-01"}),
                ExpectedTool(name="book", arguments={"seat": {"row": 3, "side": "aisle"}}),
            ),
        ),
    ),
)


def _conversation(
    cid: str,
    version: str,
    *,
    date: str = "07-01",
    side: str = "aisle",
    book: bool = True,
    answer: str = "Rome at 9",
    complete: bool = True,
) -> Conversation:
    calls = [ToolCall(name="search_flights", arguments={"to": "Rome", "date": date})]
    if book:
        calls.append(ToolCall(name="book", arguments={"seat": {"row": 3, "side": side}}))
    return Conversation(
        id=cid,
        agent_name="travel",
        agent_version=version,
        complete=complete,
        turns=(Turn(query="flights to Rome?", answer=answer, tool_calls=tuple(calls)),),
    )


def _put(store: StateStore, convs: list[tuple[Conversation, float]], revision: int = 0) -> None:
    evaluator = Evaluator()

    async def put_all() -> None:
        for conv, at in convs:
            result = evaluator.evaluate(conv, REFERENCE, reference_set="travel-refs")
            await store.put_result(
                conv.id,
                revision=revision,
                closed_at=at,
                n_spans=3,
                stored=StoredResult(conv, result, revision),
                evaluated_at=at,
            )

    asyncio.run(put_all())


def _signatures(conv: Conversation) -> tuple[str, ...]:
    result = Evaluator().evaluate(conv, REFERENCE, reference_set="s")
    return failure_analysis(result, conv.complete).signatures


def test_signatures_of_each_fault_kind() -> None:
    assert _signatures(_conversation("a", "1")) == ()
    assert _signatures(_conversation("a", "1", date="07-02")) == (
        "wrong_argument:search_flights.date",
    )
    # Nested arguments: the path goes down to the differing leaf.
    assert _signatures(_conversation("a", "1", side="window")) == ("wrong_argument:book.seat.side",)
    assert _signatures(_conversation("a", "1", book=False)) == ("missing_tool:book",)
    assert _signatures(_conversation("a", "1", answer="Paris")) == ("answer:contains",)
    assert _signatures(_conversation("a", "1", date="x", answer="no")) == (
        "wrong_argument:search_flights.date",
        "answer:contains",
    )


def test_argument_paths_and_signatures_are_bounded() -> None:
    deep: dict[str, Any] = {"v": 1}
    for _ in range(10):
        deep = {"k": deep}
    other: dict[str, Any] = {"v": 2}
    for _ in range(10):
        other = {"k": other}
    path = argument_path("root", deep, other)
    assert path.count(".") == MAX_PATH_DEPTH - 1
    assert len(bound("wrong_argument:" + "x" * 500)) == MAX_SIGNATURE_CHARS
    assert "\n" not in bound("wrong_argument:a\nb")


def test_conversation_judges_hook() -> None:
    """Conversation judges' verdicts (the result's `judgements`) that say no."""
    from types import SimpleNamespace

    from tracepass.evaluator.scoring.failure_signatures import judge_failures

    result: Any = SimpleNamespace(
        judgements=(
            SimpleNamespace(name="tone", passed=False),
            SimpleNamespace(name="helpful", passed=True),
            {"name": "safety", "passed": False},
            SimpleNamespace(name="budget", passed=None),
        )
    )
    assert judge_failures(result) == ["tone", "safety"]


@given(st.text(max_size=400))
def test_bound_is_one_short_line(text: str) -> None:
    out = bound(text)
    assert len(out) <= MAX_SIGNATURE_CHARS
    assert "\n" not in out


@pytest.fixture
def store(tmp_path: Path) -> Any:
    s = StateStore(tmp_path / "state.sqlite")
    s.open()
    yield s
    s.close()


def test_modes_counts_shares_examples_and_new(store: StateStore) -> None:
    convs: list[tuple[Conversation, float]] = []
    # 1.0: 10 pass, 4 wrong dates, 2 missing book.
    for i in range(10):
        convs.append((_conversation(f"a{i}", "1.0"), T0 + i))
    for i in range(4):
        convs.append((_conversation(f"d{i}", "1.0", date="07-02"), T0 + 20 + i))
    for i in range(2):
        convs.append((_conversation(f"m{i}", "1.0", book=False), T0 + 30 + i))
    # 1.1: 3 wrong dates, 5 wrong seat sides (new), 1 evicted.
    for i in range(3):
        convs.append((_conversation(f"e{i}", "1.1", date="07-03"), T0 + 100 + i))
    for i in range(5):
        convs.append((_conversation(f"s{i}", "1.1", side="window"), T0 + 200 + i))
    convs.append((_conversation("x0", "1.1", book=False, complete=False), T0 + 210))
    _put(store, convs)

    body = failure_modes(store, {"agent_name": "travel", "agent_version": "1.1"})
    assert body["baseline_version"] == "1.0"
    assert body["failing_conversations"] == 9
    modes = {m["signature"]: m for m in body["failure_modes"]}
    assert [m["signature"] for m in body["failure_modes"]][:2] == [
        "wrong_argument:book.seat.side",
        "wrong_argument:search_flights.date",
    ]
    side = modes["wrong_argument:book.seat.side"]
    assert side["count"] == 5
    assert side["share"] == pytest.approx(5 / 9)
    assert side["new"] is True
    assert side["examples"] == ["s4", "s3", "s2"]
    assert sum(side["trend"]) == 5
    assert modes["wrong_argument:search_flights.date"]["new"] is False
    assert modes["wrong_argument:search_flights.date"]["count"] == 3
    assert modes["incomplete:evicted"]["count"] == 1
    assert modes["missing_tool:book"]["new"] is False

    older = failure_modes(store, {"agent_name": "travel", "agent_version": "1.0"})
    assert older["baseline_version"] is None
    assert not any(m["new"] for m in older["failure_modes"])
    assert {m["signature"]: m["count"] for m in older["failure_modes"]} == {
        "wrong_argument:search_flights.date": 4,
        "missing_tool:book": 2,
    }
    # An explicit baseline and a time range (whole minutes: T0 + 170 selects the
    # minute starting at T0 + 160, holding s0-s4 and x0).
    vs = failure_modes(
        store,
        {"agent_version": "1.1", "baseline_version": "1.1", "since": str(T0 + 170), "limit": "1"},
    )
    assert vs["failure_modes"] == [
        {**vs["failure_modes"][0], "signature": "wrong_argument:book.seat.side", "new": False}
    ]
    assert vs["failing_conversations"] == 6
    with pytest.raises(ParamError):
        failure_modes(store, {"limit": "0"})

    # The failing list filtered to a mode.
    model = ReadModel(store, list, RollingConfig(windows=(("1h", 3600.0),)), clock=lambda: T0)
    listed = model.conversations({"failure_mode": "wrong_argument:book.seat.side"})
    assert [c["conversation_id"] for c in listed["conversations"]] == [
        f"s{i}" for i in range(4, -1, -1)
    ]
    both = model.conversations({"failure_mode": "missing_tool:book", "outcome": "incomplete"})
    assert [c["conversation_id"] for c in both["conversations"]] == ["x0"]


def test_reevaluation_replaces_rows_and_the_bound_keeps_other(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "s.sqlite")
    store.failure_modes.max_per_version = 2
    store.open()
    try:
        _put(store, [(_conversation("c", "2", date="07-09"), T0)])
        # A later revision that passes removes the mode.
        _put(store, [(_conversation("c", "2"), T0 + 1)], revision=1)
        assert failure_modes(store, {"agent_version": "2"})["failure_modes"] == []
        _put(
            store,
            [
                (_conversation("p", "2", date="x"), T0 + 2),
                (_conversation("q", "2", book=False), T0 + 3),
                (_conversation("r", "2", side="window"), T0 + 4),
                (_conversation("s", "2", answer="no"), T0 + 5),
            ],
        )
        modes = {
            m["signature"]: m["count"]
            for m in failure_modes(store, {"agent_version": "2"})["failure_modes"]
        }
        assert modes == {
            "wrong_argument:search_flights.date": 1,
            "missing_tool:book": 1,
            "other": 2,
        }
        before = failure_modes(store, {"agent_version": "2"})
    finally:
        store.close()
    # The counters are rebuilt from the table when the file opens again.
    again = StateStore(tmp_path / "s.sqlite")
    again.open()
    try:
        assert failure_modes(again, {"agent_version": "2"}) == before
    finally:
        again.close()


def test_purged_results_leave_the_counts(store: StateStore) -> None:
    _put(store, [(_conversation(f"d{i}", "3", date="x"), T0 + i) for i in range(3)])
    assert failure_modes(store, {"agent_version": "3"})["failing_conversations"] == 3

    async def purge() -> None:
        await store.purge(T0 + 1000)
        await store.purge_results(T0 + 1000)

    asyncio.run(purge())
    body = failure_modes(store, {"agent_version": "3"})
    assert body["failing_conversations"] == 0
    assert body["failure_modes"] == []
    listed = store.read(lambda c: c.execute("SELECT count(*) FROM result_failure_modes").fetchone())
    assert listed == (0,)
