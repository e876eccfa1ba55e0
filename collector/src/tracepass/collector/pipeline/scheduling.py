"""Evaluation scheduling: what the pipeline hands a completed conversation to, and the
per-conversation chains that keep revisions in order.

Evaluations of one conversation run strictly in revision order (a chain of tasks per
conversation); different conversations are scored concurrently up to a limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from tracepass.collector.assembly import Completed
from tracepass.collector.pipeline.gc_pause import batch_gc_pause
from tracepass.evaluator.models import Conversation, ConversationResult, Policy, Reference

__all__ = [
    "BatchSteps",
    "ConversationEvaluator",
    "EvaluationChains",
    "Finish",
    "ResultInfo",
    "ResultListener",
    "Scored",
]

log = logging.getLogger(__name__)


class ConversationEvaluator(Protocol):
    """What the pipeline needs from `tracepass.evaluator.scoring.evaluator.Evaluator`."""

    async def aevaluate(
        self,
        conversation: Conversation,
        reference: Reference | None,
        *,
        reference_set: str | None = None,
        policy: Policy | None = None,
    ) -> ConversationResult: ...


@dataclass(frozen=True, slots=True)
class ResultInfo:
    """Context of one evaluation handed to the result listener (metrics, events).

    `revision` is 0 for the first evaluation of a conversation and n for the n-th
    re-evaluation caused by late spans; a later revision supersedes earlier ones.
    `lag_s` is the time from the conversation's last span end to its evaluation.
    """

    revision: int
    reason: str
    lag_s: float
    now: float
    complete: bool
    reference_set: str | None
    match_method: str | None
    conversation: Conversation
    # The result's entry in the state file's window journal (None: not stored, e.g. no
    # state file or the disk is full); the windows' snapshot records how far it got.
    journal_seq: int | None = None
    # When the conversation was closed for this evaluation and how many records it had
    # (what the results store keeps beside the result).
    closed_at: float = 0.0
    n_spans: int = 0
    # Set by the metrics link for a revision not newer than the one already recorded:
    # the links after it (events, failure log) skip it.
    stale: bool = False


ResultListener = Callable[[ConversationResult, ResultInfo], Awaitable[None] | None]


# What `evaluate` may hand back: the rest of the evaluation (persisting the result,
# then the listener), awaited outside the concurrency limit.
Finish = Awaitable[None] | None
# A scored conversation on its way to the result chain (`EvaluationStage.prepare`).
Scored = tuple[ConversationResult, ResultInfo]


class BatchSteps(Protocol):
    """The two halves of an evaluation, for batches (`EvaluationChains.schedule_batch`):
    `prepare` scores one conversation (None: nothing to hand on), `deliver` hands the
    scored ones down the result chain together."""

    async def prepare(self, item: Completed) -> Scored | None: ...

    async def deliver(self, scored: list[Scored]) -> None: ...


class EvaluationChains:
    """Runs `evaluate(item)` for every scheduled conversation: one chain per conversation
    key (a revision waits for the previous one, including its `Finish`), at most
    `concurrency` evaluating at a time.

    Why the `Finish` runs outside the limit: it waits for the result store's group
    commit (milliseconds, more on a busy disk). Held inside the limit, those waits
    capped throughput at `concurrency` conversations per commit — a collector refusing
    work (503) with its core half idle. Outside it, every waiting result joins the same
    group commit, and the limit bounds only what it is for: scoring and judge calls."""

    def __init__(
        self,
        evaluate: Callable[[Completed], Awaitable[Finish]],
        *,
        concurrency: int,
        on_error: Callable[[], None],
        batch: BatchSteps | None = None,
    ) -> None:
        self._evaluate = evaluate
        self._on_error = on_error
        self._batch = batch
        self._sem = asyncio.Semaphore(concurrency)
        self._chains: dict[str, asyncio.Task[None]] = {}
        self.inflight = 0

    def schedule_batch(self, items: Sequence[Completed]) -> None:
        """Schedule the conversations completed together (one loop iteration's) as ONE
        task: scored one after the other in one concurrency slot, then handed down the
        result chain together (one store operation for all). Why: a task, a slot and a
        store operation per conversation cost more than scoring a small one. A
        conversation whose previous revision is still being evaluated is scheduled
        after it as usual; and as soon as one evaluation of the batch waits on the loop
        (a judge, an awaiting grader), the rest of the batch goes on as one task each,
        so slow evaluations still run `concurrency` at a time."""
        if self._batch is None or len(items) < 2:
            for item in items:
                self.schedule(item)
            return
        free: list[Completed] = []
        rest: list[Completed] = []
        taken: set[str] = set()
        for item in items:
            if item.key in self._chains or item.key in taken:
                rest.append(item)  # after its previous revision (a second one: the batch)
            else:
                free.append(item)
                taken.add(item.key)
        if free:
            self.inflight += len(free)
            task = asyncio.create_task(self._run_batch(free, self._batch))
            for item in free:
                self._chains[item.key] = task
            keys = [item.key for item in free]

            def done(t: asyncio.Task[None]) -> None:
                self.inflight -= len(keys)
                for key in keys:
                    if self._chains.get(key) is t:
                        del self._chains[key]

            task.add_done_callback(done)
        for item in rest:
            self.schedule(item)

    async def _run_batch(self, items: list[Completed], steps: BatchSteps) -> None:
        with batch_gc_pause.held():  # no young collections mid-batch (gc_pause.py)
            await self._run_batch_paused(items, steps)

    async def _run_batch_paused(self, items: list[Completed], steps: BatchSteps) -> None:
        scored: list[Scored] = []
        spilled: list[asyncio.Task[None]] = []
        loop = asyncio.get_running_loop()
        async with self._sem:
            for n, item in enumerate(items):
                # Did this evaluation wait on the loop? A callback scheduled now runs
                # only if it did.
                waited = [False]
                probe = loop.call_soon(waited.__setitem__, 0, True)
                try:
                    one = await steps.prepare(item)
                except Exception:
                    one = None
                    self._on_error()
                    log.exception("evaluation of conversation %s failed", item.key)
                probe.cancel()
                batch_gc_pause.check()
                if one is not None:
                    scored.append(one)
                if waited[0] and n + 1 < len(items):
                    spilled = [asyncio.create_task(self._after(None, it)) for it in items[n + 1 :]]
                    break
        if scored:
            try:
                await steps.deliver(scored)
            except Exception:
                self._on_error()
                log.exception("handing on %d evaluated conversations failed", len(scored))
        if spilled:
            await asyncio.gather(*spilled, return_exceptions=True)

    def schedule(self, item: Completed) -> None:
        previous = self._chains.get(item.key)
        self.inflight += 1
        task = asyncio.create_task(self._after(previous, item))
        self._chains[item.key] = task

        def done(t: asyncio.Task[None], key: str = item.key) -> None:
            self.inflight -= 1
            if self._chains.get(key) is t:
                del self._chains[key]

        task.add_done_callback(done)

    async def drain(self) -> None:
        """Return once every scheduled evaluation (and any scheduled meanwhile) finished."""
        while self._chains:
            await asyncio.gather(*list(self._chains.values()), return_exceptions=True)

    async def _after(self, previous: asyncio.Task[None] | None, item: Completed) -> None:
        if previous is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(previous)
        finish: Finish = None
        async with self._sem:
            try:
                finish = await self._evaluate(item)
            except Exception:
                self._on_error()
                log.exception("evaluation of conversation %s failed", item.key)
        if finish is not None:
            try:
                await finish
            except Exception:
                self._on_error()
                log.exception("evaluation of conversation %s failed", item.key)
