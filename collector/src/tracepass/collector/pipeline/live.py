"""`Pipeline`: the live collector behind the receivers, as two stages and a loop.

    receivers ──▶ IngestStage (admission → sampling → normalize → assembly, span buffer)
                        │ conversations complete (assembly)
                        ▼
                  EvaluationStage (scheduling → build → match → score) ──▶ result chain
                                                                          (results store
                                                                           first)

`Pipeline` owns what both stages share (the assembler, the reference catalog, the state
file when it built it), the background loop (completion, reference reloads, retention)
and restart recovery (`recovery.py`); it is the `SpanSink` the receivers feed and
answers the conversation API's two questions (`latest_result`, `open_conversation`).
Results are kept as data (`StoredResult`); rendering them is the API's job.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from opentelemetry import metrics
from opentelemetry.metrics import Meter
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracepass.collector.assembly import DEFAULT_PRICES, Assembler, build_conversation
from tracepass.collector.config import (
    AssemblyConfig,
    CollectorConfig,
    ConventionsConfig,
    MatchingConfig,
    StateConfig,
)
from tracepass.collector.instruments import CollectorInstruments
from tracepass.collector.matching import ReferenceSource
from tracepass.collector.normalize import ReadTally
from tracepass.collector.pipeline.components import ListenerComponent, ResultChain
from tracepass.collector.pipeline.evaluation import EvaluationStage
from tracepass.collector.pipeline.ingest import IngestStage
from tracepass.collector.pipeline.offline import Normalizer
from tracepass.collector.pipeline.recovery import restore_conversations
from tracepass.collector.pipeline.results import ResultsWriter
from tracepass.collector.pipeline.sampling import ConversationSampler
from tracepass.collector.pipeline.scheduling import ConversationEvaluator, ResultListener
from tracepass.collector.receiver import IngestResult
from tracepass.collector.records import Rejection, SpanRecord
from tracepass.collector.state import StateStore, StoredResult, unusable_state
from tracepass.evaluator.models import Conversation, ConversationResult
from tracepass.evaluator.pricing import PriceBook

__all__ = ["Pipeline"]

log = logging.getLogger(__name__)


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
        result_cache_size: int = 10_000,
        sampler: ConversationSampler | None = None,
        journal_entry: Callable[[ConversationResult], str] | None = None,
        store: StateStore | None = None,
        results: ResultsWriter | None = None,
        allow_command_graders: bool = False,
        prices: PriceBook | None = None,
        conventions: ConventionsConfig | None = None,
    ) -> None:
        self.assembly_config = assembly or AssemblyConfig()
        # Model prices for conversation costs (`pricing.models` over the price library).
        self.prices = prices if prices is not None else DEFAULT_PRICES
        self.state_config = state
        self.matching_config = matching or MatchingConfig()
        self.clock = clock
        self.purge_interval_s = purge_interval_s
        meter = meter or metrics.get_meter("tracepass.collector")
        self.instruments = instruments or CollectorInstruments.create(meter)
        self.references = reference_source or ReferenceSource(
            references,
            fuzzy=self.matching_config.fuzzy,
            fuzzy_threshold=self.matching_config.fuzzy_threshold,
            meter=meter,
            allow_command_graders=allow_command_graders,
        )
        # The span buffer: given (the service owns its lifecycle), or built from `state`
        # and opened/closed by this pipeline.
        self._owns_store = store is None and state is not None
        if store is None and state is not None:
            store = StateStore(
                state.path,
                durability=state.durability,
                batch_max_delay_ms=state.batch_max_delay_ms,
            )
        self.store = store
        self.assembler = Assembler(
            self.assembly_config,
            self.instruments,
            clock=clock,
            end_grace_s=end_grace_s,
            turn_target=lambda ref, query: self.references.catalog.turn_target(ref, query),
            # `batch`: what was acknowledged stays in the span buffer for `retention_s`
            # after evaluation, so late spans read it back from there (ingest.py).
            records_on_disk=store is not None and store.durability == "batch",
        )
        # Every result goes down one chain (`components.py`): the results store first,
        # then whatever the caller listens with. `listener` may be the whole chain built
        # by the service (holding `results` already).
        self._owns_results = results is None
        self.results = results or ResultsWriter(
            store, journal_entry=journal_entry, cache_size=result_cache_size
        )
        chain: ResultListener
        if results is not None and listener is not None:
            chain = listener
        else:
            chain = ResultChain([self.results])
            if listener is not None:
                chain.append(ListenerComponent(listener))
        self.sampler = sampler if sampler is not None and sampler.active else None
        self.evaluation = EvaluationStage(
            evaluator,
            assembler=self.assembler,
            references=self.references,
            store=store,
            listener=chain,
            instruments=self.instruments,
            meter=meter,
            clock=clock,
            sampler=self.sampler,
            concurrency=evaluation_concurrency,
            prices=self.prices,
        )
        self.intake = IngestStage(
            assembly_config=self.assembly_config,
            assembler=self.assembler,
            store=store,
            instruments=self.instruments,
            clock=clock,
            sampler=self.sampler,
            normalizer=normalizer,
            inflight=lambda: self.evaluation.inflight,
            wake=self._wake_loop,
            ready=self.ready,
            unready_reason=self.unready_reason,
            max_pending_evaluations=max_pending_evaluations,
            max_state_backlog=max_state_backlog,
            conventions=conventions,
        )
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._ready = False
        # Components that can be degraded while the pipeline still takes spans (the
        # results database): each says why, or None. `/readyz` shows what they say.
        self.readiness_checks: list[Callable[[], str | None]] = []
        blocked_references = getattr(self.references, "readiness", None)
        if callable(blocked_references):  # reference files blocked by the last reload
            self.readiness_checks.append(blocked_references)

    @classmethod
    def from_config(
        cls, config: CollectorConfig, evaluator: ConversationEvaluator, **kwargs: Any
    ) -> Pipeline:
        # The default normalizer (built lazily with `config.assembly`'s keys) also fills
        # the pipeline's read tally.
        return cls(
            evaluator,
            assembly=config.assembly,
            state=config.state,
            matching=config.matching,
            references=config.references,
            allow_command_graders=config.evaluation.allow_command_graders,
            prices=config.pricing.book(),
            conventions=config.conventions,
            **kwargs,
        )

    # ------------------------------------------------------------------ parts

    @property
    def evaluator(self) -> ConversationEvaluator:
        return self.evaluation.evaluator

    @evaluator.setter
    def evaluator(self, evaluator: ConversationEvaluator) -> None:
        self.evaluation.evaluator = evaluator

    @property
    def listener(self) -> ResultListener:
        return self.evaluation.listener

    @property
    def read_tally(self) -> ReadTally:
        return self.intake.read_tally

    @property
    def durability(self) -> str:
        return "none" if self.store is None else self.store.durability

    # ------------------------------------------------------------------ lifecycle

    async def start(self, *, background: bool = True) -> None:
        """Load references (a broken file fails startup), recover state, start ticking."""
        self.references.load()
        if self.store is not None:
            await self._open_state()
        if background:
            self._task = asyncio.create_task(self._loop(), name="tracepass-pipeline")
        self._ready = True

    async def _open_state(self) -> None:
        """Open the state file (when this pipeline owns it) and recover from it; a
        damaged file or a read-only directory is a `StateError` naming the path (exit
        2), not a traceback."""
        assert self.store is not None
        try:
            if self._owns_store:
                await asyncio.to_thread(self.store.open)
            await asyncio.to_thread(self._recover)
        except Exception as exc:
            error = unusable_state(self.store.path, exc)
            if error is None or error is exc:
                raise
            raise error from exc

    def _recover(self) -> None:
        assert self.store is not None
        restore_conversations(
            self.assembler,
            self.store.load(self.intake.normalize, self.intake.normalize_logs),
            now=self.clock(),
            retention_s=self.assembly_config.retention_s,
            source=self.store.path,
        )

    async def stop(self) -> None:
        """Stop taking spans, evaluate what is due, wait for running evaluations and
        persist what is still open (in `none` durability too) so a restart resumes it."""
        self._ready = False
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self.process_due()
        if self._owns_results:
            await self.results.shutdown()
        store = self.store
        if store is None:
            return
        if store.durability == "none" and store.is_open:
            rows: list[tuple[str, SpanRecord]] = []
            for key in self.assembler.open_keys():
                snap = self.assembler.snapshot(key)
                if snap is not None:
                    rows.extend((key, r) for r in snap[0])
            if rows:
                await store.write_spans(rows, self.clock())
        if self._owns_store:
            await asyncio.to_thread(store.close)

    def ready(self) -> bool:
        return self._ready and self.unready_reason() is None

    def unready_reason(self) -> str | None:
        """Why the pipeline cannot take data although started (`/readyz` shows it)."""
        identity = self.store.identity if self.store is not None else None
        return identity.problem() if identity is not None else None

    def readiness_notes(self) -> list[str]:
        """What is degraded though spans are still taken (shown by `/readyz`)."""
        return [note for check in self.readiness_checks if (note := check()) is not None]

    # ------------------------------------------------------------------ ingest (SpanSink)

    async def ingest(self, request: ExportTraceServiceRequest) -> IngestResult:
        return await self.intake.ingest(request)

    async def ingest_logs(self, request: ExportLogsServiceRequest) -> IngestResult:
        return await self.intake.ingest_logs(request)

    async def ingest_records(
        self, records: Iterable[SpanRecord], rejections: Sequence[Rejection] = ()
    ) -> IngestResult:
        """`ingest` for already-normalized records (tests, replay, other front ends)."""
        return await self.intake.ingest_records(records, rejections)

    # ------------------------------------------------------------------ background loop

    def _wake_loop(self) -> None:
        self._wake.set()

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

    async def process_due(self, now: float | None = None, *, wait: bool = True) -> int:
        """Hand every conversation that is complete by `now` to evaluation; with `wait`,
        return after all evaluations (including earlier running ones) finished."""
        return await self.evaluation.process_due(now, wait=wait)

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
            await self.store.results.purge_results(cutoff - keep_results)
        return purged

    @property
    def unstored_results(self) -> int:
        """Evaluations whose storage is being retried (disk full)."""
        return self.results.retrying

    def shed_memory(self) -> None:
        """Called above `limits.max_memory_mb`: give up what costs nothing acknowledged
        (evaluated conversations kept for late spans, cached results), then collect."""
        self.assembler.shed_retained()
        self.results.forget_cached()
        gc.collect()

    # ------------------------------------------------------------------ queries

    def latest_result(self, conversation_id: str) -> StoredResult | None:
        """The latest evaluation of a conversation (memory first, then the results store)."""
        return self.results.latest(conversation_id, read_store=self._ready)

    def open_conversation(self, conversation_id: str) -> tuple[Conversation, int] | None:
        """A conversation still being assembled (or re-assembled after late spans) as
        rebuilt so far, with the revision its next evaluation will have."""
        snap = self.assembler.snapshot(conversation_id)
        if snap is None or not snap[2]:
            return None
        records, revision, _ = snap
        return (
            build_conversation(conversation_id, records, complete=False, prices=self.prices),
            revision,
        )
