"""The collector behind the receivers: normalize → (durable state) → assembly → matching
→ evaluation → results, as one asyncio component implementing `SpanSink` and
the queries the conversation API renders (`latest_result`, `open_conversation`).

Logs requests take the same path: their GenAI events become EVENT records
(`normalize/logs.py`) that are routed, buffered, stored and recovered like spans, and
joined to their span when the conversation is built, whichever arrived first.

Why it is shaped like this:
- `ingest` does only bounded work on the event loop (normalize, a dict insert per span)
  and, in `batch` durability, waits for the group commit that makes the spans durable;
  everything slow (completion, matching, scoring, result storage) runs in a background
  task, so a slow judge never holds an exporter's request open.
- Back-pressure instead of loss: when the evaluation backlog or the state writer's queue
  is over its cap, `ingest` raises `Overloaded` *before* touching the request, so the
  client retries and nothing is acknowledged that is then dropped.
- Evaluations run through `scheduling.EvaluationChains` (revision order per
  conversation); recovery is `recovery.py`; offline assembly is `offline.py`.
- Results are kept as data (`StoredResult`); rendering them is the API's job.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import inspect
import itertools
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from opentelemetry import metrics
from opentelemetry.metrics import Counter, Meter
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracepass.collector.assembly import AddOutcome, Assembler, Completed, build_conversation
from tracepass.collector.assembly.timeline import DEFAULT_PRICES
from tracepass.collector.config import (
    AssemblyConfig,
    CollectorConfig,
    MatchingConfig,
    StateConfig,
)
from tracepass.collector.instruments import CollectorInstruments
from tracepass.collector.matching import Match, ReferenceSource
from tracepass.collector.normalize import CONVERSATION_ID_KEYS
from tracepass.collector.normalize.records import RecordKind, Rejection, SpanRecord
from tracepass.collector.normalize.stats import ReadTally
from tracepass.collector.pipeline.offline import (
    LogsNormalizer,
    Normalizer,
    default_logs_normalizer,
    default_normalizer,
)
from tracepass.collector.pipeline.orphan_events import check_orphan_events, is_event
from tracepass.collector.pipeline.recovery import restore_conversations
from tracepass.collector.pipeline.sampling import ConversationSampler
from tracepass.collector.pipeline.scheduling import (
    ConversationEvaluator,
    EvaluationChains,
    Finish,
    ResultInfo,
    ResultListener,
)
from tracepass.collector.receiver.decode import count_log_records
from tracepass.collector.receiver.sink import IngestResult, Overloaded
from tracepass.collector.state import StateError, StateStore, StoredResult
from tracepass.collector.state.unusable import unusable_state
from tracepass.evaluator.models import Conversation, ConversationResult
from tracepass.evaluator.pricing import PriceBook
from tracepass.evaluator.ratelimited_log import RateLimitedLog

__all__ = ["Pipeline"]

log = logging.getLogger(__name__)

# Requests with more spans than this are normalized off the event loop and assembled in
# slices of this many records, yielding in between.
_LARGE_BATCH = 20_000
# Evaluated results kept in memory when a state file holds them all (see __init__).
STORED_RESULTS_IN_MEMORY = 256


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
        allow_command_graders: bool = False,
        prices: PriceBook | None = None,
    ) -> None:
        self.assembly_config = assembly or AssemblyConfig()
        # Model prices for conversation costs (`pricing.models` over the price library).
        self.prices = prices if prices is not None else DEFAULT_PRICES
        self.state_config = state
        self.matching_config = matching or MatchingConfig()
        self.evaluator = evaluator
        self.clock = clock
        self.listener = listener
        # What the state file's window journal keeps of each result (the rolling
        # windows' entry, supplied by whoever owns the windows); None: no journal.
        self.journal_entry = journal_entry
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
            allow_command_graders=allow_command_graders,
        )
        self._normalizer = normalizer
        self._logs_normalizer: LogsNormalizer | None = None
        # Filled by the default normalizers (a custom one reports nothing), drained per
        # request into tracepass_spans_read / tracepass_fields_unreadable.
        self.read_tally = ReadTally()
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
        self._chains = EvaluationChains(
            self._evaluate, concurrency=evaluation_concurrency, on_error=self._count_error
        )
        self._results: OrderedDict[str, StoredResult] = OrderedDict()
        # Results whose storage failed (disk full) and is retried: the API must still
        # find them, however many results were evaluated since.
        self._unstored: dict[str, StoredResult] = {}
        self._retries: set[asyncio.Task[None]] = set()
        self._log = RateLimitedLog(log)
        # With a state file every stored result is read back from it, so memory keeps
        # only the newest few (the API's hot path). Why not 10,000 as without one: each
        # is a conversation and its result as ~60 live objects that every full GC pass
        # scans; 10,000 of them made full collections pause the loop for ~300 ms.
        self._result_cache_size = (
            result_cache_size
            if self.store is None
            else min(result_cache_size, STORED_RESULTS_IN_MEMORY)
        )
        self.sampler = sampler if sampler is not None and sampler.active else None
        self._conversation_id_keys = CONVERSATION_ID_KEYS + tuple(
            self.assembly_config.conversation_id_keys
        )
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._ready = False
        self._stopping = False

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
            **kwargs,
        )

    # ------------------------------------------------------------------ lifecycle

    @property
    def durability(self) -> str:
        return "none" if self.store is None else self.store.durability

    async def start(self, *, background: bool = True) -> None:
        """Load references (a broken file fails startup), recover state, start ticking."""
        self.references.load()
        if self.store is not None:
            await self._open_state()
        if background:
            self._task = asyncio.create_task(self._loop(), name="tracepass-pipeline")
        self._ready = True

    async def _open_state(self) -> None:
        """Open the state file and recover from it; a damaged file or a read-only
        directory is a `StateError` naming the path (exit 2), not a traceback."""
        assert self.store is not None
        try:
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
            self.store.load(self._normalize, self._normalize_logs),
            now=self.clock(),
            retention_s=self.assembly_config.retention_s,
            source=self.store.path,
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
        if self._retries:
            # Stop retrying: what could not be stored is re-evaluated from its stored
            # spans at the next start (its result row never reached the file).
            for task in list(self._retries):
                task.cancel()
            await asyncio.gather(*self._retries, return_exceptions=True)
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
        return self._ready and self.unready_reason() is None

    def unready_reason(self) -> str | None:
        """Why the pipeline cannot take data although started (`/readyz` shows it)."""
        identity = self.store.identity if self.store is not None else None
        return identity.problem() if identity is not None else None

    # ------------------------------------------------------------------ ingest (SpanSink)

    def _normalize(
        self, request: ExportTraceServiceRequest
    ) -> tuple[list[SpanRecord], list[Rejection]]:
        if self._normalizer is None:
            self._normalizer = default_normalizer(
                self.assembly_config.conversation_id_keys, self.read_tally
            )
        return self._normalizer(request)

    def _normalize_logs(
        self, request: ExportLogsServiceRequest
    ) -> tuple[list[SpanRecord], list[Rejection]]:
        if self._logs_normalizer is None:
            self._logs_normalizer = default_logs_normalizer(
                self.assembly_config.conversation_id_keys, self.read_tally
            )
        return self._logs_normalizer(request)

    def _check_capacity(self) -> None:
        if not self._ready:
            raise Overloaded("collector is starting or stopping", retry_after_s=1.0)
        unready = self.unready_reason()
        if unready is not None:  # acknowledging now would lose the data (file_identity.py)
            raise Overloaded(unready, retry_after_s=5.0)
        backlog = self._chains.inflight + self.assembler.ready_count
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

    def _check_evictions(self, records: list[SpanRecord]) -> None:
        """Refuse (retryably) a batch whose new conversations would push more open ones
        out than the evaluation backlog may still take: one request of 200,000 distinct
        traces would otherwise queue ~190,000 incomplete evaluations past the cap (and
        hold their memory) while every exporter got 503 for minutes."""
        asm = self.assembler
        limit = self.assembly_config.max_open_conversations
        if asm.conversation_count + len(records) <= limit:
            return  # cannot evict, whatever the routing (the common case: no work)
        # GenAI log events open no conversation (their own budget: orphan_events.py).
        new_keys = {
            k
            for k in map(asm.route, itertools.filterfalse(is_event, records))
            if not asm.is_open(k) or asm.is_orphan(k)
        }
        evictions = asm.conversation_count + len(new_keys) - limit
        room = self.max_pending_evaluations - (self._chains.inflight + asm.ready_count)
        if evictions > room:
            raise Overloaded(
                f"request opens {len(new_keys)} conversations: {evictions} open ones would be "
                f"evicted, the evaluation backlog has room for {max(room, 0)} "
                f"(max_open_conversations={limit})",
                retry_after_s=1.0,
            )

    async def ingest(self, request: ExportTraceServiceRequest) -> IngestResult:
        self._check_capacity()
        sampled_out = 0
        if self.sampler is not None:
            sampled_out = self.sampler.prefilter_request(request, self._conversation_id_keys)
        if sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans) > (
            _LARGE_BATCH
        ):
            # Normalization is pure: a huge request is normalized in a worker thread so
            # the event loop (other exporters, /healthz) keeps running meanwhile.
            records, rejections = await asyncio.to_thread(self._normalize, request)
            self._check_capacity()
        else:
            records, rejections = self._normalize(request)
        self._check_evictions(records)
        result = await self._ingest(records, rejections, request)
        if sampled_out:
            # Acknowledged like any other span: the client must not retry them.
            return IngestResult(
                accepted=result.accepted + sampled_out,
                rejected=result.rejected,
                message=result.message,
            )
        return result

    async def ingest_logs(self, request: ExportLogsServiceRequest) -> IngestResult:
        """The traces path for log records: admission, the large-batch thread, the
        eviction check, plus the orphan-event budget (`orphan_events.py`)."""
        self._check_capacity()
        if count_log_records(request) > _LARGE_BATCH:
            records, rejections = await asyncio.to_thread(self._normalize_logs, request)
            self._check_capacity()
        else:
            records, rejections = self._normalize_logs(request)
        check_orphan_events(self.assembler, records, self.assembly_config.max_orphan_events)
        self._check_evictions(records)
        ignored = count_log_records(request) - len(records) - len(rejections)
        if ignored:
            self.instruments.log_records_ignored.add(ignored)
        return await self._ingest(
            records, rejections, request, self.instruments.log_records_rejected, "log records"
        )

    async def ingest_records(
        self, records: Iterable[SpanRecord], rejections: Sequence[Rejection] = ()
    ) -> IngestResult:
        """`ingest` for already-normalized records (tests, replay, other front ends)."""
        self._check_capacity()
        batch = list(records)
        self._check_evictions(batch)
        return await self._ingest(batch, list(rejections))

    async def _ingest(
        self,
        records: list[SpanRecord],
        rejections: Sequence[Rejection],
        request: ExportTraceServiceRequest | ExportLogsServiceRequest | None = None,
        rejected: Counter | None = None,
        items: str = "spans",
    ) -> IngestResult:
        rejected = rejected or self.instruments.spans_rejected
        for rej in rejections:
            rejected.add(1, {"reason": rej.reason})
        read, unreadable = self.read_tally.drain()
        for (convention, adapter), n in read.items():
            self.instruments.spans_read.add(n, {"convention": convention, "adapter": adapter})
        for field_name, n in unreadable.items():
            self.instruments.fields_unreadable.add(n, {"field": field_name})
        if self.sampler is not None:
            kept = self.sampler.filter_arrivals(records)
            if len(kept) != len(records):
                # Sampled-out spans must not reach the state file: store the kept
                # records themselves instead of the request as received.
                request = None
            records = kept
        if len(records) > _LARGE_BATCH:
            outcome = await self._add_in_slices(records)
        else:
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
            message = f"{len(rejections)} {items} rejected; first: {first.message}"
        return IngestResult(accepted=len(records), rejected=len(rejections), message=message)

    async def _add_in_slices(self, records: list[SpanRecord]) -> AddOutcome:
        """`assembler.add` in slices of `_LARGE_BATCH` records, yielding to the event loop
        between them (assembly must stay on the loop; 500,000 spans in one go held it for
        seconds). Equivalent to adding the slices as consecutive requests, which the
        assembler handles in any split; the outcomes are joined for the state write."""
        keys: list[str | None] = []
        merged: list[tuple[str, str]] = []
        duplicate_at: list[int] = []
        duplicates = late = dropped = 0
        for start in range(0, len(records), _LARGE_BATCH):
            part = self.assembler.add(records[start : start + _LARGE_BATCH])
            keys.extend(part.keys)
            merged.extend(part.merged)
            duplicate_at.extend(start + i for i in part.duplicate_at)
            duplicates += part.duplicates
            late += part.late
            dropped += part.dropped
            await asyncio.sleep(0)
        return AddOutcome(
            records=records,
            keys=keys,
            duplicates=duplicates,
            late=late,
            dropped=dropped,
            merged=merged,
            duplicate_at=tuple(duplicate_at),
        )

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
        given_up = self.assembler.take_given_up()
        if self.store is not None and given_up:
            # All queued at once: the writer commits them in a few batches (one await
            # each took a commit apiece: 9,000 orphan buffers given up held this 45 s).
            await asyncio.gather(*(self.store.discard(key) for key in given_up))
        for item in completed:
            self._chains.schedule(item)
        if wait:
            await self._chains.drain()
        return len(completed)

    def _count_error(self) -> None:
        self._eval_errors.add(1)

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
        """Score one conversation; returns the rest (`_finish`: store the result, then
        tell the listener) for the chain to await outside the concurrency limit."""
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
        stored = StoredResult(conversation, result, item.revision)
        self._remember(item.key, stored)
        return self._finish(item, stored, now, lag, set_name, match)

    async def _finish(
        self,
        item: Completed,
        stored: StoredResult,
        now: float,
        lag: float,
        set_name: str | None,
        match: Match | None,
    ) -> None:
        """Persist the result (the group commit), then hand it to the listener. When it
        cannot be stored (disk full) the listener still gets it (the windows must not
        miss evaluations the API shows) and the write is retried in the background."""
        result, conversation = stored.result, stored.conversation
        assert result is not None
        journal_seq: int | None = None
        if self.store is not None:
            write = self._result_writer(item, stored, now)
            try:
                journal_seq = await write()
            except StateError as exc:
                # Disk full or I/O trouble: the evaluation still reaches the windows and
                # the API now, and its storage is retried in the background until the
                # disk has room (a crash meanwhile re-evaluates it from the stored spans).
                self._log.error(
                    "put_result",
                    "result of conversation %s not stored, retrying in the background: %s",
                    item.key,
                    exc,
                )
                self._unstored[item.key] = stored
                self._retry_in_background(item.key, write)
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
                journal_seq=journal_seq,
            )
            try:
                ret = self.listener(result, info)
                if inspect.isawaitable(ret):
                    await ret
            except Exception:
                log.exception("result listener failed for conversation %s", item.key)

    def _result_writer(
        self, item: Completed, stored: StoredResult, now: float
    ) -> Callable[[], Awaitable[int]]:
        store = self.store
        assert store is not None
        journal = (
            None
            if self.journal_entry is None or stored.result is None
            else self.journal_entry(stored.result)
        )

        def write() -> Awaitable[int]:
            return store.put_result(
                item.key,
                revision=item.revision,
                closed_at=item.closed_at,
                n_spans=len(item.records),
                stored=stored,
                evaluated_at=now,
                journal=journal,
            )

        return write

    def _retry_in_background(self, key: str, write: Callable[[], Awaitable[int]]) -> None:
        async def retry() -> None:
            delay = 0.5
            while not self._stopping:
                await asyncio.sleep(delay)
                try:
                    await write()
                except StateError:
                    delay = min(delay * 2, 30.0)
                    continue
                self._log.info("stored_after_retry", "result of %s stored after a retry", key)
                self._unstored.pop(key, None)
                return

        task = asyncio.create_task(retry(), name=f"tracepass-store-retry-{key}")
        self._retries.add(task)
        task.add_done_callback(self._retries.discard)

    @property
    def unstored_results(self) -> int:
        """Evaluations whose storage is being retried (disk full)."""
        return len(self._retries)

    def shed_memory(self) -> None:
        """Called above `limits.max_memory_mb`: give up what costs nothing acknowledged
        (evaluated conversations kept for late spans, cached results), then collect."""
        self.assembler.shed_retained()
        self._results.clear()  # the unstored ones stay: nothing else has them
        gc.collect()

    def _remember(self, key: str, stored: StoredResult) -> None:
        self._results[key] = stored
        self._results.move_to_end(key)
        while len(self._results) > self._result_cache_size:
            self._results.popitem(last=False)

    # ------------------------------------------------------------------ queries

    def latest_result(self, conversation_id: str) -> StoredResult | None:
        """The latest evaluation of a conversation (memory first, then the state file)."""
        stored = self._results.get(conversation_id) or self._unstored.get(conversation_id)
        if stored is None and self.store is not None and self._ready:
            stored = self.store.get_result(conversation_id)
        return stored

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
