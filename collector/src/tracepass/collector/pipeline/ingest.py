"""The ingest half of the pipeline: admission → sampling → normalize → assembly, and the
write-ahead span buffer.

Why it is shaped like this:
- `ingest` does only bounded work on the event loop (normalize, a dict insert per span)
  and, in `batch` durability, waits for the group commit that makes the spans durable;
  everything slow (completion, matching, scoring, result storage) is the evaluation
  stage's (`evaluation.py`), in a background task, so a slow judge never holds an
  exporter's request open.
- Back-pressure instead of loss: when the evaluation backlog or the state writer's queue
  is over its cap, `ingest` raises `Overloaded` *before* touching the request, so the
  client retries and nothing is acknowledged that is then dropped.
- Logs requests take the same path: their GenAI events become EVENT records
  (`normalize/logs.py`) that are routed, buffered, stored and recovered like spans, and
  joined to their span when the conversation is built, whichever arrived first.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Iterable, Sequence

from opentelemetry.metrics import Counter
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracepass.collector.assembly import AddOutcome, Assembler
from tracepass.collector.config import AssemblyConfig, ConventionsConfig
from tracepass.collector.instruments import CollectorInstruments
from tracepass.collector.normalize import CONVERSATION_ID_KEYS, ReadTally
from tracepass.collector.pipeline.offline import (
    LogsNormalizer,
    Normalizer,
    default_logs_normalizer,
    default_normalizer,
)
from tracepass.collector.pipeline.orphan_events import check_orphan_events, is_event
from tracepass.collector.pipeline.sampling import ConversationSampler
from tracepass.collector.receiver import IngestResult, Overloaded, count_log_records
from tracepass.collector.records import Rejection, SpanRecord
from tracepass.collector.state import StateError, StateStore

__all__ = ["LARGE_BATCH", "IngestStage"]

# Requests with more spans than this are normalized off the event loop and assembled in
# slices of this many records, yielding in between.
LARGE_BATCH = 20_000
_LARGE_BATCH = LARGE_BATCH


class IngestStage:
    """Takes export requests into assembly (and the span buffer) or refuses them whole.
    `inflight` counts evaluations not finished (the backlog cap), `wake` tells the
    evaluation loop that conversations are ready, `ready` says whether to take work."""

    def __init__(
        self,
        *,
        assembly_config: AssemblyConfig,
        assembler: Assembler,
        store: StateStore | None,
        instruments: CollectorInstruments,
        clock: Callable[[], float],
        sampler: ConversationSampler | None,
        normalizer: Normalizer | None,
        inflight: Callable[[], int],
        wake: Callable[[], None],
        ready: Callable[[], bool],
        unready_reason: Callable[[], str | None],
        max_pending_evaluations: int,
        max_state_backlog: int,
        conventions: ConventionsConfig | None = None,
    ) -> None:
        self.assembly_config = assembly_config
        # `conventions.custom`: the user's mappings, read by the default normalizer.
        self.conventions_config = conventions
        # The `scope` label of tracepass_spans_unrecognized: the service sets it to the
        # metrics' label limiter (bounded); a bare pipeline labels with the scope name.
        self.scope_label: Callable[[str], str] = _scope_name
        self.assembler = assembler
        self.store = store
        self.instruments = instruments
        self.clock = clock
        self.sampler = sampler
        self.max_pending_evaluations = max_pending_evaluations
        self.max_state_backlog = max_state_backlog
        self._inflight = inflight
        self._wake = wake
        self._ready = ready
        self._unready_reason = unready_reason
        self._normalizer = normalizer
        self._logs_normalizer: LogsNormalizer | None = None
        self._read_back_with: tuple[Normalizer, LogsNormalizer] | None = None
        # Filled by the default normalizers (a custom one reports nothing), drained per
        # request into tracepass_spans_read / tracepass_fields_unreadable.
        self.read_tally = ReadTally()
        self._conversation_id_keys = CONVERSATION_ID_KEYS + tuple(
            assembly_config.conversation_id_keys
        )

    def normalize(
        self, request: ExportTraceServiceRequest
    ) -> tuple[list[SpanRecord], list[Rejection]]:
        if self._normalizer is None:
            self._normalizer = default_normalizer(
                self.assembly_config.conversation_id_keys,
                self.read_tally,
                self.conventions_config,
            )
        return self._normalizer(request)

    def normalize_logs(
        self, request: ExportLogsServiceRequest
    ) -> tuple[list[SpanRecord], list[Rejection]]:
        if self._logs_normalizer is None:
            self._logs_normalizer = default_logs_normalizer(
                self.assembly_config.conversation_id_keys, self.read_tally
            )
        return self._logs_normalizer(request)

    def _count_unrecognized(self) -> None:
        """tracepass_spans_unrecognized{scope}, drained from the read tally."""
        for scope, n in self.read_tally.drain_unrecognized().items():
            self.instruments.spans_unrecognized.add(n, {"scope": self.scope_label(scope)})

    def _check_capacity(self) -> None:
        if not self._ready():
            unready = self._unready_reason()
            if unready is not None:  # acknowledging now would lose the data (file_identity.py)
                raise Overloaded(unready, retry_after_s=5.0)
            raise Overloaded("collector is starting or stopping", retry_after_s=1.0)
        backlog = self._inflight() + self.assembler.ready_count
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
        room = self.max_pending_evaluations - (self._inflight() + asm.ready_count)
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
            records, rejections = await asyncio.to_thread(self.normalize, request)
            self._check_capacity()
        else:
            records, rejections = self.normalize(request)
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
            records, rejections = await asyncio.to_thread(self.normalize_logs, request)
            self._check_capacity()
        else:
            records, rejections = self.normalize_logs(request)
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
        self._count_unrecognized()
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
            if self.assembler.keys_to_read_back(records):
                await self._read_back(records)
            outcome = self.assembler.add(records)
        if self.assembler.ready_count:
            self._wake()
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

    async def _read_back(self, records: list[SpanRecord]) -> None:
        """Late spans for evaluated conversations whose records are on disk only
        (`batch` durability, `assembly/retention.py`): read those conversations back from
        the span buffer first, so the revision holds everything the first evaluation
        saw. Re-checked after the read: a conversation may have expired meanwhile (its
        late span is then dropped like any after retention)."""
        assert self.store is not None
        normalize, normalize_logs = self._read_back_normalizers()
        keys = self.assembler.keys_to_read_back(records)
        found = await self.store.spans.read_back(keys, normalize, normalize_logs)
        for key in keys:
            self.assembler.read_back(key, found.get(key, ()))

    def _read_back_normalizers(self) -> tuple[Normalizer, LogsNormalizer]:
        """The normalizers that produced the stored records, minus the read tally (the
        spans were counted as read when they arrived)."""
        if self._read_back_with is None:
            keys = self.assembly_config.conversation_id_keys
            normalize = self._normalizer or default_normalizer(keys, None, self.conventions_config)
            self._read_back_with = (normalize, default_logs_normalizer(keys, None))
        return self._read_back_with

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
            part_records = records[start : start + _LARGE_BATCH]
            if self.assembler.keys_to_read_back(part_records):
                await self._read_back(part_records)
            part = self.assembler.add(part_records)
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


def _scope_name(scope: str) -> str:
    """The default `scope` label: the scope name (empty: `unknown`)."""
    return scope or "unknown"
