"""Evaluating and storing a loop iteration's conversations as one batch: one store
operation (`StateStore.put_results`) leaves the state file exactly as storing them one
by one does (results, violations, failure-mode rows and counters, window journal); a
batch the database refuses is stored one by one; the result chain hands a batch link by
link; the scheduler keeps revisions in order and falls back to a task per conversation
when an evaluation waits on the loop."""

from __future__ import annotations

import asyncio
import random
import sqlite3
from pathlib import Path
from typing import Any

from test_failure_modes import REFERENCE, T0, _conversation
from test_scheduling import item

from tracepass.collector.assembly import Completed
from tracepass.collector.pipeline.components import ResultChain, ResultComponent
from tracepass.collector.pipeline.results import ResultsWriter
from tracepass.collector.pipeline.scheduling import EvaluationChains, ResultInfo, Scored
from tracepass.collector.state import ResultWrite, StateStore, StoredResult
from tracepass.collector.state.failure_index import ModeScope
from tracepass.evaluator.models import Conversation, ConversationResult
from tracepass.evaluator.scoring.evaluator import Evaluator

TABLES = ("results", "result_violations", "result_failure_modes", "window_log")


def _writes(revision: int = 0, *, faults: bool = True) -> list[ResultWrite]:
    """Six conversations of two versions, some failing in different ways."""
    evaluator = Evaluator()
    convs = [
        _conversation("ok-1", "1"),
        _conversation("date-1", "1", date="07-02" if faults else "07-01"),
        _conversation("side-2", "2", side="window" if faults else "aisle"),
        _conversation("nobook-2", "2", book=not faults),
        _conversation("answer-2", "2", answer="Paris" if faults else "Rome"),
        _conversation("ok-2", "2"),
    ]
    out = []
    for i, conv in enumerate(convs):
        result = evaluator.evaluate(conv, REFERENCE, reference_set="travel-refs")
        at = T0 + 60 * revision + i
        journal = f'["{conv.id}",null,null,null,"t",true,"[]"]'
        out.append(
            ResultWrite(conv.id, revision, at, 3, StoredResult(conv, result, revision), at, journal)
        )
    return out


def _tables(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    conn = sqlite3.connect(path)
    try:
        return {t: sorted(conn.execute(f"SELECT * FROM {t}").fetchall(), key=repr) for t in TABLES}
    finally:
        conn.close()


def _store(path: Path, batched: bool) -> tuple[dict[str, Any], list[list[int]]]:
    """Store two rounds (the second re-evaluates every conversation: the failing ones
    pass now, so their failure-mode rows go), batched or one by one; returns the
    counters' totals and the journal sequence numbers."""
    store = StateStore(path)
    store.open()
    seqs: list[list[int]] = []

    async def run() -> None:
        for revision, faults in ((0, True), (1, False)):
            writes = _writes(revision, faults=faults)
            if batched:
                seqs.append(await store.put_results(writes))
            else:
                seqs.append(
                    [
                        await store.put_result(
                            w.key,
                            revision=w.revision,
                            closed_at=w.closed_at,
                            n_spans=w.n_spans,
                            stored=w.stored,
                            evaluated_at=w.evaluated_at,
                            journal=w.journal,
                        )
                        for w in writes
                    ]
                )
            totals.append(store.failure_modes.counters.totals(ModeScope()))

    totals: list[Any] = []
    try:
        asyncio.run(run())
        return {"totals": totals, "first": store.failure_modes.counters.first_seen()}, seqs
    finally:
        store.close()


def test_a_batch_stores_what_one_by_one_stores(tmp_path: Path) -> None:
    batched, seqs_b = _store(tmp_path / "b.sqlite", batched=True)
    single, seqs_s = _store(tmp_path / "s.sqlite", batched=False)
    assert batched == single
    assert batched["totals"][0]  # the first round had failure modes, the second none
    assert set(batched["totals"][1]) == set()
    assert seqs_b == seqs_s == [[1, 2, 3, 4, 5, 6], [7, 8, 9, 10, 11, 12]]
    assert _tables(tmp_path / "b.sqlite") == _tables(tmp_path / "s.sqlite")


def test_a_key_twice_in_one_batch_keeps_the_newer_revision(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "s.sqlite")
    store.open()
    try:
        first, second = _writes(0)[1], _writes(1, faults=False)[1]
        asyncio.run(store.put_results([first, second]))
        got = store.get_result(first.key)
        assert got is not None
        assert got.revision == 1
        assert store.failure_modes.counters.totals(ModeScope()) == {}
        rows = store.read(lambda c: c.execute("SELECT * FROM result_failure_modes").fetchall())
        assert rows == []
    finally:
        store.close()


class _Refusing(StateStore):
    """A state file whose batch operations fail (as a result the database refuses
    would make them): the writer must store the results one by one."""

    async def put_results(self, writes: Any) -> list[int]:
        if len(writes) > 1:
            raise sqlite3.IntegrityError("refused")
        return await super().put_results(writes)


def _info(conv: Conversation, revision: int = 0) -> ResultInfo:
    return ResultInfo(
        revision=revision,
        reason="end_signal",
        lag_s=0.0,
        now=T0,
        complete=True,
        reference_set="travel-refs",
        match_method="query",
        conversation=conv,
        closed_at=T0,
        n_spans=3,
    )


def test_a_refused_batch_is_stored_one_by_one(tmp_path: Path) -> None:
    store = _Refusing(tmp_path / "s.sqlite")
    store.open()
    try:
        writer = ResultsWriter(store, journal_entry=lambda r: f'["{r.conversation_id}"]')
        writes = _writes(0)
        infos = [_info(w.stored.conversation) for w in writes]
        results = [w.stored.result for w in writes]
        assert all(r is not None for r in results)
        steps = asyncio.run(writer.on_results(results, infos))  # type: ignore[arg-type]
        assert [s.journal_seq if s else None for s in steps] == [1, 2, 3, 4, 5, 6]
        for w in writes:
            assert store.get_result(w.key) == w.stored
    finally:
        store.close()


def test_the_chain_hands_a_batch_link_by_link() -> None:
    seen: list[tuple[str, str]] = []

    class Batched(ResultComponent):
        name = "batched"

        def on_results(
            self, results: list[ConversationResult], infos: list[ResultInfo]
        ) -> list[ResultInfo | None]:
            seen.extend(("batch", r.conversation_id) for r in results)
            return [None, *(i.__class__(**{**_fields(i), "n_spans": 99}) for i in infos[1:])]

    class One(ResultComponent):
        name = "one"

        def __init__(self, tag: str, fail_on: str | None = None) -> None:
            self.tag, self.fail_on = tag, fail_on

        async def on_result(self, result: ConversationResult, info: ResultInfo) -> None:
            if result.conversation_id == self.fail_on:
                raise RuntimeError("broken consumer")
            seen.append((self.tag, f"{result.conversation_id}:{info.n_spans}"))

    writes = _writes(0)[:3]
    pairs: list[Scored] = []
    for w in writes:
        assert w.stored.result is not None
        pairs.append((w.stored.result, _info(w.stored.conversation)))
    chain = ResultChain([One("a", fail_on="date-1"), Batched(), One("b")])
    asyncio.run(chain.run_batch(pairs))
    assert seen == [
        ("a", "ok-1:3"),
        ("a", "side-2:3"),  # the broken link skipped date-1; the others still ran
        ("batch", "ok-1"),
        ("batch", "date-1"),
        ("batch", "side-2"),
        ("b", "ok-1:3"),  # None: the info unchanged
        ("b", "date-1:99"),
        ("b", "side-2:99"),
    ]


def _fields(info: ResultInfo) -> dict[str, Any]:
    return {f: getattr(info, f) for f in info.__slots__}


async def test_batches_keep_revisions_in_order_and_spill_when_an_evaluation_waits() -> None:
    rng = random.Random(11)
    order: dict[str, list[int]] = {}
    running: set[str] = set()
    delivered: list[list[str]] = []
    single: list[str] = []
    errors = 0

    class Steps:
        async def prepare(self, item: Completed) -> Scored | None:
            assert item.key not in running, "two revisions of one conversation overlapped"
            running.add(item.key)
            try:
                if item.key.startswith("slow"):
                    await asyncio.sleep(rng.random() / 1000)  # waits on the loop
                if item.key == "bad" and item.revision == 0:
                    raise RuntimeError("boom")
                order.setdefault(item.key, []).append(item.revision)
            finally:
                running.discard(item.key)
            conv = Conversation(id=item.key)
            result = ConversationResult.model_construct(conversation_id=item.key)
            return result, _info(conv, item.revision)

        async def deliver(self, scored: list[Scored]) -> None:
            delivered.append([i.conversation.id for _, i in scored])

    async def evaluate(item: Completed) -> None:  # the one-by-one path
        single.append(item.key)
        scored = await steps.prepare(item)
        if scored is not None:
            await steps.deliver([scored])

    def on_error() -> None:
        nonlocal errors
        errors += 1

    steps = Steps()
    chains = EvaluationChains(evaluate, concurrency=2, on_error=on_error, batch=steps)
    fast = [f"f{i}" for i in range(6)]
    for revision in range(3):
        keys = [*fast, "bad", *(["slow1", "slow2"] if revision == 1 else [])]
        chains.schedule_batch([item(k, revision) for k in rng.sample(keys, len(keys))])
        # A second revision of f0 in the same batch runs after the first.
        chains.schedule_batch([item("f0", 10 + revision), item("f1", 20 + revision)])
        await asyncio.sleep(0)
    await chains.drain()
    assert chains.inflight == 0
    assert errors == 1  # bad, revision 0
    assert order["f0"] == [0, 10, 1, 11, 2, 12]
    assert order["f1"] == [0, 20, 1, 21, 2, 22]
    assert all(order[k] == [0, 1, 2] for k in fast[2:])
    assert order["bad"] == [1, 2]
    assert order["slow1"] == order["slow2"] == [1]
    assert any(len(b) > 2 for b in delivered)  # batches delivered together
    assert set(single) <= {*fast, "bad", "slow1", "slow2"}  # the spilled rest
