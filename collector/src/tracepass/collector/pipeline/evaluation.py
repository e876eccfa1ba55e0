"""The evaluation half of the pipeline: scheduling → build → match → score → results.

Assembly decides when a conversation is complete; from there `EvaluationStage` takes it:
it is scheduled on its conversation's chain (`scheduling.py`: revisions in order,
scoring concurrency bounded), built, matched to a reference, sampled (the completion
decision), scored, and its result handed down the result chain (`components.py`: the
results store first). Everything here runs in the background task, never in an
exporter's request, so a slow judge holds no client.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable

from opentelemetry.metrics import Meter

from tracepass.collector.assembly import DEFAULT_PRICES, Assembler, Completed, build_conversation
from tracepass.collector.instruments import CollectorInstruments
from tracepass.collector.matching import Match, ReferenceSource
from tracepass.collector.pipeline.sampling import ConversationSampler
from tracepass.collector.pipeline.scheduling import (
    ConversationEvaluator,
    EvaluationChains,
    Finish,
    ResultInfo,
    ResultListener,
    Scored,
)
from tracepass.collector.records import RecordKind
from tracepass.collector.state import StateStore
from tracepass.evaluator.models import Conversation
from tracepass.evaluator.pricing import PriceBook
from tracepass.evaluator.ratelimited_log import RateLimitedLog

__all__ = ["EvaluationStage"]

log = logging.getLogger(__name__)


class EvaluationStage:
    def __init__(
        self,
        evaluator: ConversationEvaluator,
        *,
        assembler: Assembler,
        references: ReferenceSource,
        store: StateStore | None,
        listener: ResultListener,
        instruments: CollectorInstruments,
        meter: Meter,
        clock: Callable[[], float],
        sampler: ConversationSampler | None,
        concurrency: int,
        prices: PriceBook = DEFAULT_PRICES,
    ) -> None:
        self.evaluator = evaluator
        self.prices = prices  # model prices for conversation costs
        self.assembler = assembler
        self.references = references
        self.store = store
        self.listener = listener
        self.instruments = instruments
        self.clock = clock
        self.sampler = sampler
        self._errors = meter.create_counter(
            "tracepass_evaluation_errors",
            description="Completed conversations whose evaluation raised (not scored)",
        )
        self.chains = EvaluationChains(
            self._evaluate, concurrency=concurrency, on_error=self._count_error, batch=self
        )
        self._log = RateLimitedLog(log)

    @property
    def inflight(self) -> int:
        """Evaluations scheduled and not finished (part of the ingest's backlog cap)."""
        return self.chains.inflight

    async def process_due(self, now: float | None = None, *, wait: bool = True) -> int:
        """Hand every conversation that is complete by `now` to evaluation; with `wait`,
        return after all evaluations (including earlier running ones) finished."""
        completed = self.assembler.poll(now)
        given_up = self.assembler.take_given_up()
        if self.store is not None and given_up:
            # All queued at once: the writer commits them in a few batches (one await
            # each took a commit apiece: 9,000 orphan buffers given up held this 45 s).
            await asyncio.gather(*(self.store.discard(key) for key in given_up))
        self.chains.schedule_batch(completed)
        if wait:
            await self.chains.drain()
        return len(completed)

    def _count_error(self) -> None:
        self._errors.add(1)

    def _note_unknown_reference_id(
        self, conversation: Conversation, match: Match | None, revision: int
    ) -> None:
        """A misspelled `reference_id` falls back to query matching: count it
        (`tracepass_reference_id_unknown_total`) and say it (rate-limited), once per
        conversation (not again on a revision)."""
        named = conversation.reference_id
        if not named or revision != 0 or (match is not None and match.method == "id"):
            return
        self.instruments.reference_ids_unknown.add(1)
        self._log.warning(
            "reference_id_unknown",
            "conversation %s names reference_id %r, which no loaded reference set has; %s",
            conversation.id,
            named,
            "matched by its query instead"
            if match is not None
            else "matched nothing (check the id and the --references files)",
        )

    async def _evaluate(self, item: Completed) -> Finish:
        """Score one conversation; returns the rest (`deliver`: the result chain, whose
        first link stores it) for the chain to await outside the concurrency limit."""
        scored = await self.prepare(item)
        return None if scored is None else self.deliver([scored])

    async def prepare(self, item: Completed) -> Scored | None:
        """Build, match, sample and score one conversation (None: nothing to hand on)."""
        if all(r.kind is RecordKind.EVENT for r in item.records):
            # Only GenAI log events (an evicted buffer whose spans never came): nothing to
            # evaluate; the assembler counted them, and no restart may restore them.
            if self.store is not None:
                await self.store.discard(item.key)
            return None
        conversation = build_conversation(
            item.key, item.records, complete=item.complete, prices=self.prices
        )
        match = self.references.catalog.match(conversation)
        self._note_unknown_reference_id(conversation, match, item.revision)
        if match is None and item.revision == 0:
            self.instruments.conversations_unmatched.add(1)
            self._log.info("unmatched", "conversation %s matched no reference", item.key)
        reference = match.reference if match is not None else None
        set_name = match.reference_set if match is not None else None
        if self.sampler is not None and not self.sampler.keep_completed(
            item.key,
            conversation.agent_name,
            conversation.agent_version,
            set_name if match is not None and match.method == "id" else None,
            reference,
        ):
            if self.store is not None:
                await self.store.discard(item.key)
            return None
        policy = self.references.catalog.policy_for(conversation)
        if policy is None:  # evaluators written before policies take no `policy`
            result = await self.evaluator.aevaluate(conversation, reference, reference_set=set_name)
        else:
            result = await self.evaluator.aevaluate(
                conversation, reference, reference_set=set_name, policy=policy
            )
            set_name = result.reference_set
        now = self.clock()
        last_end = max((r.end_ns for r in item.records), default=0)
        lag = max(0.0, now - last_end / 1e9) if last_end else 0.0
        info = ResultInfo(
            revision=item.revision,
            reason=item.reason,
            lag_s=lag,
            now=now,
            complete=item.complete,
            reference_set=set_name,
            match_method=match.method if match is not None else None,
            conversation=conversation,
            closed_at=item.closed_at,
            n_spans=len(item.records),
        )
        return result, info

    async def deliver(self, scored: list[Scored]) -> None:
        """Hand scored conversations down the result chain (the results store first: its
        group commit), all at once when the listener takes batches (`ResultChain`)."""
        run_batch = getattr(self.listener, "run_batch", None)
        if run_batch is not None and len(scored) > 1:
            try:
                await run_batch(scored)
            except Exception:
                log.exception("result listener failed for %d conversations", len(scored))
            return
        for result, info in scored:
            try:
                ret = self.listener(result, info)
                if inspect.isawaitable(ret):
                    await ret
            except Exception:
                log.exception("result listener failed for conversation %s", info.conversation.id)
