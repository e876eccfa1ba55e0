"""The collector behind the receivers: normalize → (durable state) → assembly → matching
→ evaluation → results, as one asyncio component implementing `SpanSink` and
`ConversationQuery`.

Why it is shaped like this:
- `ingest` does only bounded work on the event loop (normalize, a dict insert per span)
  and, in `batch` durability, waits for the group commit that makes the spans durable;
  everything slow (completion, matching, scoring, result storage) runs in a background
  task, so a slow judge never holds an exporter's request open.
- Back-pressure instead of loss: when the evaluation backlog or the state writer's queue
  is over its cap, `ingest` raises `Overloaded` *before* touching the request, so the
  client retries and nothing is acknowledged that is then dropped.
- Evaluations of one conversation run strictly in revision order (a per-conversation
  chain); different conversations are scored concurrently up to a limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import inspect
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from opentelemetry import metrics
from opentelemetry.metrics import Meter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracepass.collector.assembly import Assembler, Completed, Reason, build_conversation
from tracepass.collector.config import (
    AssemblyConfig,
    CollectorConfig,
    MatchingConfig,
    StateConfig,
)
from tracepass.collector.instruments import CollectorInstruments
from tracepass.collector.matching import ReferenceSource
from tracepass.collector.normalize.records import Rejection, SpanRecord

if TYPE_CHECKING:
    from tracepass.collector.normalize import OtlpRequest
from tracepass.collector.sink import IngestResult, Overloaded
from tracepass.collector.state import StateError, StateStore
from tracepass.collector.views import conversation_view_json
from tracepass.evaluator.models import Conversation, ConversationResult, Reference

log = logging.getLogger(__name__)

Normalizer = Callable[[ExportTraceServiceRequest], tuple[list[SpanRecord], list[Rejection]]]


class ConversationEvaluator(Protocol):
    """What the pipeline needs from `tracepass.evaluator.scoring.Evaluator`."""

    async def aevaluate(
        self,
        conversation: Conversation,
        reference: Reference | None,
        *,
        reference_set: str | None = None,
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


ResultListener = Callable[[ConversationResult, ResultInfo], Awaitable[None] | None]


# Young-generation threshold of the cyclic garbage collector while a pipeline runs.
GC_GEN0_THRESHOLD = 10_000


def tune_gc(gen0: int = GC_GEN0_THRESHOLD) -> None:
    """Raise the GC's young-generation threshold to `gen0` (never lower it).

    Why: the collector holds every buffered span as a long-lived record, and ingest
    allocates several container objects per span (records, protobuf wrappers, decoded
    JSON); with CPython's default threshold (700) a young collection runs every ~100
    spans and the older generations, which scan everything buffered, follow in
    proportion. That cost 2-3 us per span at ~50k buffered spans (measured: about 15%
    of ingest CPU); 10,000 takes most of it away for a few MB of extra young garbage.
    Process-wide, like any GC setting; `Pipeline(tune_gc=False)` leaves it alone."""
    t0, t1, t2 = gc.get_threshold()
    if 0 < t0 < gen0:
        gc.set_threshold(gen0, t1, t2)


def default_normalizer(conversation_id_keys: Sequence[str] = ()) -> Normalizer:
    # Imported late so that assembly can be used (and tested) on records alone.
    from tracepass.collector.normalize import normalize_request

    return partial(normalize_request, conversation_id_keys=tuple(conversation_id_keys))


class Pipeline:
    def __init__(
        self,
        evaluator: ConversationEvaluator,
        *,
        assembly: AssemblyConfig | None = None,
        state: StateConfig | None = None,
        matching: MatchingConfig | None = None,
        references: Sequence[Path] = (),
        reference_source: ReferenceSource | None = None,
        instruments: CollectorInstruments | None = None,
        meter: Meter | None = None,
        listener: ResultListener | None = None,
        clock: Callable[[], float] = time.time,
        normalizer: Normalizer | None = None,
        end_grace_s: float = 5.0,
        max_pending_evaluations: int = 1024,
        max_state_backlog: int = 4096,
        evaluation_concurrency: int = 8,
        purge_interval_s: float = 60.0,
        view_cache_size: int = 10_000,
        tune_gc: bool = True,
    ) -> None:
        self.assembly_config = assembly or AssemblyConfig()
        self.state_config = state
        self.matching_config = matching or MatchingConfig()
        self.evaluator = evaluator
        self.clock = clock
        self.listener = listener
        self.max_pending_evaluations = max_pending_evaluations
        self.max_state_backlog = max_state_backlog
        self.purge_interval_s = purge_interval_s
        meter = meter or metrics.get_meter("tracepass.collector")
        self.instruments = instruments or CollectorInstruments.create(meter)
        self._eval_errors = meter.create_counter(
            "tracepass_evaluation_errors",
            description="Completed conversations whose evaluation raised (not scored)",
        )
        self.references = reference_source or ReferenceSource(
            references,
            fuzzy=self.matching_config.fuzzy,
            fuzzy_threshold=self.matching_config.fuzzy_threshold,
            meter=meter,
        )
        self._normalizer = normalizer
        self.assembler = Assembler(
            self.assembly_config,
            self.instruments,
            clock=clock,
            end_grace_s=end_grace_s,
            turn_target=self._turn_target,
        )
        self.store: StateStore | None = (
            StateStore(
                state.path,
                durability=state.durability,
                batch_max_delay_ms=state.batch_max_delay_ms,
            )
            if state is not None
            else None
        )
        self._sem = asyncio.Semaphore(evaluation_concurrency)
        self._chains: dict[str, asyncio.Task[None]] = {}
        self._inflight = 0
        self._views: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._view_cache_size = view_cache_size
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._ready = False
        self._stopping = False
        self._tune_gc = tune_gc

    @classmethod
    def from_config(
        cls, config: CollectorConfig, evaluator: ConversationEvaluator, **kwargs: Any
    ) -> Pipeline:
        kwargs.setdefault("normalizer", default_normalizer(config.assembly.conversation_id_keys))
        return cls(
            evaluator,
            assembly=config.assembly,
            state=config.state,
            matching=config.matching,
            references=config.references,
            **kwargs,
        )

    # ------------------------------------------------------------------ lifecycle

    @property
    def durability(self) -> str:
        return "none" if self.store is None else self.store.durability

    async def start(self, *, background: bool = True) -> None:
        """Load references (a broken file fails startup), recover state, start ticking."""
        if self._tune_gc:
            tune_gc()
        self.references.load()
        if self.store is not None:
            await asyncio.to_thread(self.store.open)
            await asyncio.to_thread(self._recover)
        if background:
            self._task = asyncio.create_task(self._loop(), name="tracepass-pipeline")
        self._ready = True

    def _recover(self) -> None:
        assert self.store is not None
        now = self.clock()
        retention = self.assembly_config.retention_s
        reopened = retained = opened = 0
        for sc in self.store.load(self._normalize):
            if sc.closed_at is None or sc.revision is None:
                self.assembler.restore(sc.key, sc.records, last_seen=sc.last_seen)
                opened += 1
            elif sc.closed_at + retention > now:
                if len(sc.records) > (sc.evaluated_spans or 0):
                    self.assembler.restore(
                        sc.key, sc.records, last_seen=sc.last_seen, revision=sc.revision + 1
                    )
                    reopened += 1
                else:
                    self.assembler.restore(
                        sc.key,
                        sc.records,
                        last_seen=sc.last_seen,
                        revision=sc.revision,
                        closed_at=sc.closed_at,
                    )
                    retained += 1
        if opened or reopened or retained:
            log.info(
                "recovered state from %s: %d open, %d re-opened by late spans, %d retained",
                self.store.path,
                opened,
                reopened,
                retained,
            )

    async def stop(self) -> None:
        """Stop taking spans, evaluate what is due, wait for running evaluations and
        persist what is still open (in `none` durability too) so a restart resumes it."""
        self._ready = False
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self.process_due()
        if self.store is not None:
            if self.store.durability == "none":
                rows: list[tuple[str, SpanRecord]] = []
                for key in self.assembler.open_keys():
                    snap = self.assembler.snapshot(key)
                    if snap is not None:
                        rows.extend((key, r) for r in snap[0])
                if rows:
                    await self.store.write_spans(rows, self.clock())
            await asyncio.to_thread(self.store.close)

    def ready(self) -> bool:
        return self._ready

    # ------------------------------------------------------------------ ingest (SpanSink)

    def _normalize(
        self, request: ExportTraceServiceRequest
    ) -> tuple[list[SpanRecord], list[Rejection]]:
        if self._normalizer is None:
            self._normalizer = default_normalizer(self.assembly_config.conversation_id_keys)
        return self._normalizer(request)

    def _check_capacity(self) -> None:
        if not self._ready:
            raise Overloaded("collector is starting or stopping", retry_after_s=1.0)
        backlog = self._inflight + self.assembler.ready_count
        if backlog >= self.max_pending_evaluations:
            raise Overloaded(
                f"evaluation backlog {backlog} >= {self.max_pending_evaluations}",
                retry_after_s=1.0,
            )
        if self.store is not None and self.store.backlog >= self.max_state_backlog:
            raise Overloaded(
                f"state writer backlog {self.store.backlog} >= {self.max_state_backlog}",
                retry_after_s=0.5,
            )

    async def ingest(self, request: ExportTraceServiceRequest) -> IngestResult:
        self._check_capacity()
        records, rejections = self._normalize(request)
        return await self._ingest(records, rejections, request)

    async def ingest_records(
        self, records: Iterable[SpanRecord], rejections: Sequence[Rejection] = ()
    ) -> IngestResult:
        """`ingest` for already-normalized records (tests, replay, other front ends)."""
        self._check_capacity()
        return await self._ingest(list(records), list(rejections))

    async def _ingest(
        self,
        records: list[SpanRecord],
        rejections: Sequence[Rejection],
        request: ExportTraceServiceRequest | None = None,
    ) -> IngestResult:
        for rej in rejections:
            self.instruments.spans_rejected.add(1, {"reason": rej.reason})
        outcome = self.assembler.add(records)
        if self.assembler.ready_count:
            self._wake.set()
        store = self.store
        if (
            store is not None
            and store.durability == "batch"
            and (outcome.merged or outcome.any_held)
        ):
            try:
                if request is not None:
                    # The request as received (one row), not a JSON row per span.
                    await store.write_request(request, outcome.keys, self.clock(), outcome.merged)
                else:
                    await store.write_spans(outcome.held, self.clock(), outcome.merged)
            except StateError as exc:
                # Not acknowledged: the client retries, and dedupe makes that safe.
                raise Overloaded(f"state write failed: {exc}", retry_after_s=1.0) from exc
        message = ""
        if rejections:
            first = rejections[0]
            message = f"{len(rejections)} spans rejected; first: {first.message}"
        return IngestResult(accepted=len(records), rejected=len(rejections), message=message)

    # ------------------------------------------------------------------ completion loop

    def _turn_target(self, reference_id: str | None, query: str | None) -> int | None:
        return self.references.catalog.turn_target(reference_id, query)

    async def _loop(self) -> None:
        tick = self.assembly_config.tick_interval_s
        reload_every = self.matching_config.reload_interval_s
        next_reload = time.monotonic() + reload_every
        next_purge = time.monotonic() + self.purge_interval_s
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=tick)
            self._wake.clear()
            try:
                await self.process_due(wait=False)
                mono = time.monotonic()
                if mono >= next_reload:
                    next_reload = mono + reload_every
                    await asyncio.to_thread(self.references.poll)
                if mono >= next_purge and self.store is not None:
                    next_purge = mono + self.purge_interval_s
                    await self.purge()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("pipeline tick failed")

    async def purge(self) -> int:
        """Delete stored spans of conversations evaluated longer than `retention_s` ago,
        and their results `state.results_retention_s` after that."""
        if self.store is None:
            return 0
        now = self.clock()
        cutoff = now - self.assembly_config.retention_s
        purged = await self.store.purge(cutoff, keep=self.assembler.open_keys())
        keep_results = self.state_config.results_retention_s if self.state_config else 0.0
        if keep_results > 0:
            await self.store.purge_results(cutoff - keep_results)
        return purged

    async def process_due(self, now: float | None = None, *, wait: bool = True) -> int:
        """Hand every conversation that is complete by `now` to evaluation; with `wait`,
        return after all evaluations (including earlier running ones) finished."""
        completed = self.assembler.poll(now)
        for item in completed:
            self._schedule(item)
        if wait:
            while self._chains:
                await asyncio.gather(*list(self._chains.values()), return_exceptions=True)
        return len(completed)

    def _schedule(self, item: Completed) -> None:
        previous = self._chains.get(item.key)
        self._inflight += 1
        task = asyncio.create_task(self._evaluate_after(previous, item))
        self._chains[item.key] = task

        def done(t: asyncio.Task[None], key: str = item.key) -> None:
            self._inflight -= 1
            if self._chains.get(key) is t:
                del self._chains[key]

        task.add_done_callback(done)

    async def _evaluate_after(self, previous: asyncio.Task[None] | None, item: Completed) -> None:
        if previous is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(previous)
        async with self._sem:
            try:
                await self._evaluate(item)
            except Exception:
                self._eval_errors.add(1)
                log.exception("evaluation of conversation %s failed", item.key)

    async def _evaluate(self, item: Completed) -> None:
        conversation = build_conversation(item.key, item.records, complete=item.complete)
        match = self.references.catalog.match(conversation)
        if match is None and item.revision == 0:
            self.instruments.conversations_unmatched.add(1)
            log.info("conversation %s matched no reference", item.key)
        reference = match.reference if match is not None else None
        set_name = match.reference_set if match is not None else None
        result = await self.evaluator.aevaluate(conversation, reference, reference_set=set_name)
        now = self.clock()
        last_end = max((r.end_ns for r in item.records), default=0)
        lag = max(0.0, now - last_end / 1e9) if last_end else 0.0
        view = conversation_view_json(conversation, result, revision=item.revision)
        self._remember_view(item.key, view)
        if self.store is not None:
            await self.store.put_result(
                item.key,
                revision=item.revision,
                closed_at=item.closed_at,
                n_spans=len(item.records),
                view=view,
                evaluated_at=now,
            )
        if self.listener is not None:
            info = ResultInfo(
                revision=item.revision,
                reason=item.reason,
                lag_s=lag,
                now=now,
                complete=item.complete,
                reference_set=set_name,
                match_method=match.method if match is not None else None,
                conversation=conversation,
            )
            try:
                ret = self.listener(result, info)
                if inspect.isawaitable(ret):
                    await ret
            except Exception:
                log.exception("result listener failed for conversation %s", item.key)

    def _remember_view(self, key: str, view: dict[str, Any]) -> None:
        self._views[key] = view
        self._views.move_to_end(key)
        while len(self._views) > self._view_cache_size:
            self._views.popitem(last=False)

    # ------------------------------------------------------------------ queries

    def conversation_view(self, conversation_id: str) -> dict[str, Any] | None:
        stored = self._views.get(conversation_id)
        if stored is None and self.store is not None and self._ready:
            stored = self.store.get_view(conversation_id)
        snap = self.assembler.snapshot(conversation_id)
        if snap is not None and snap[2]:
            # Still being assembled (or re-assembled after late spans): show what we have
            # next to the latest evaluation, if any.
            records, revision, _ = snap
            conv = build_conversation(conversation_id, records, complete=False)
            view = conversation_view_json(conv, None, revision=revision, status="open")
            view["evaluation"] = stored.get("evaluation") if stored else None
            return view
        return stored


# ---------------------------------------------------------------------- offline use


def assemble_records(records: Iterable[SpanRecord]) -> list[Conversation]:
    """Conversations from a finite set of records: everything completes at end of input."""
    from opentelemetry.metrics import NoOpMeter

    big = 2**62
    config = AssemblyConfig(
        max_open_conversations=big, max_buffered_spans=big, max_spans_per_conversation=big
    )
    asm = Assembler(config, CollectorInstruments.create(NoOpMeter("offline")), clock=lambda: 0.0)
    asm.add(records)
    done = asm.poll(0.0) + asm.flush_all(Reason.SHUTDOWN)
    convs = [build_conversation(c.key, c.records) for c in done]
    # Traces where no agent worked (only setup spans) build conversations without turns.
    convs = [c for c in convs if c.turns]
    convs.sort(key=lambda c: (min((t.start_ns or 0 for t in c.turns), default=0), c.id))
    return convs


def assemble_offline(
    requests: Iterable[OtlpRequest],
    *,
    conversation_id_keys: Sequence[str] = (),
    normalizer: Normalizer | None = None,
) -> list[Conversation]:
    """Rebuild conversations from OTLP requests read from files (`tracepass
    conversations` / `tracepass evaluate`); logs requests carry GenAI events joined to
    their spans. Rejected spans are logged and skipped."""
    from tracepass.collector.normalize import normalize_logs_request

    normalize = normalizer or default_normalizer(conversation_id_keys)
    records: list[SpanRecord] = []
    for request in requests:
        if isinstance(request, ExportTraceServiceRequest):
            recs, rejections = normalize(request)
        else:
            recs, rejections = normalize_logs_request(
                request, conversation_id_keys=tuple(conversation_id_keys)
            )
        records.extend(recs)
        for rej in rejections:
            log.warning("span %s/%s skipped: %s", rej.trace_id, rej.span_id, rej.message)
    return assemble_records(records)
