"""EvaluationChains: revisions of one conversation run in order and never overlap,
different conversations run concurrently up to the limit, failures are counted and do
not stop the queue, and `drain` waits for everything (including work scheduled while
draining)."""

from __future__ import annotations

import asyncio
import random

from tracepass.collector.assembly import Completed
from tracepass.collector.pipeline.scheduling import EvaluationChains


def item(key: str, revision: int) -> Completed:
    return Completed(
        key=key,
        records=(),
        reason="end_signal",
        revision=revision,
        complete=True,
        last_seen=0.0,
        closed_at=0.0,
    )


async def test_revision_order_concurrency_limit_errors_and_drain() -> None:
    rng = random.Random(7)
    running: set[str] = set()
    order: dict[str, list[int]] = {}
    peak = 0
    errors = 0

    async def evaluate(it: Completed) -> None:
        nonlocal peak
        assert it.key not in running, "two revisions of one conversation overlapped"
        running.add(it.key)
        peak = max(peak, len(running))
        try:
            await asyncio.sleep(rng.random() / 1000)
            order.setdefault(it.key, []).append(it.revision)
            if it.revision == 1 and it.key == "k3":
                raise RuntimeError("boom")
        finally:
            running.discard(it.key)

    def on_error() -> None:
        nonlocal errors
        errors += 1

    chains = EvaluationChains(evaluate, concurrency=4, on_error=on_error)
    keys = [f"k{i}" for i in range(10)]
    for revision in range(5):
        for key in rng.sample(keys, len(keys)):
            chains.schedule(item(key, revision))
        await asyncio.sleep(0)
    assert 0 < chains.inflight <= 50

    async def late() -> None:  # scheduled while drain() is waiting
        await asyncio.sleep(0.002)
        chains.schedule(item("late", 0))

    waiter = asyncio.create_task(late())
    await chains.drain()
    await waiter
    await chains.drain()
    assert chains.inflight == 0
    assert errors == 1
    assert peak <= 4
    assert all(order[k] == [0, 1, 2, 3, 4] for k in keys)
    assert order["late"] == [0]
    # Idle again: no worker task is left behind, and new work still runs.
    chains.schedule(item("again", 0))
    await chains.drain()
    assert order["again"] == [0]
