"""Offline use of the live stages: rebuild conversations from a finite set of OTLP
requests or records (`tracepass conversations`, `tracepass evaluate`), everything
completing at end of input."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from functools import partial

from opentelemetry.metrics import NoOpMeter
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracepass.collector.assembly import (
    DEFAULT_PRICES,
    build_conversation,
    complete_all,
    unjoined_events,
)
from tracepass.collector.config import ConventionsConfig
from tracepass.collector.instruments import CollectorInstruments
from tracepass.collector.normalize import ReadTally
from tracepass.collector.records import Rejection, SpanRecord
from tracepass.evaluator.models import Conversation
from tracepass.evaluator.pricing import PriceBook
from tracepass.evaluator.ratelimited_log import RateLimitedLog

__all__ = [
    "LogsNormalizer",
    "Normalizer",
    "assemble_offline",
    "assemble_records",
    "default_logs_normalizer",
    "default_normalizer",
]

log = logging.getLogger(__name__)
_rate_limited = RateLimitedLog(log)  # one line per rejection reason per 10 s

Normalizer = Callable[[ExportTraceServiceRequest], tuple[list[SpanRecord], list[Rejection]]]
# Logs requests → EVENT records (GenAI events as log records, joined to spans at build).
LogsNormalizer = Callable[[ExportLogsServiceRequest], tuple[list[SpanRecord], list[Rejection]]]


def default_normalizer(
    conversation_id_keys: Sequence[str] = (),
    tally: ReadTally | None = None,
    custom: ConventionsConfig | None = None,
) -> Normalizer:
    """`normalize_request` with the configured conversation-id keys; `tally` counts how
    the spans were read (the live pipeline reports it on /metrics); `custom`, the
    config's `conventions` section, adds the user's mappings (compiled once, here)."""
    # Imported late so that assembly can be used (and tested) on records alone.
    from tracepass.collector.normalize import CustomConventions, normalize_request

    mappings = CustomConventions(custom) if custom is not None and custom.custom else None
    return partial(
        normalize_request,
        conversation_id_keys=tuple(conversation_id_keys),
        tally=tally,
        custom=mappings,
    )


def default_logs_normalizer(
    conversation_id_keys: Sequence[str] = (), tally: ReadTally | None = None
) -> LogsNormalizer:
    """`normalize_logs_request` likewise (its events tallied as `genai_log_events`)."""
    from tracepass.collector.normalize import normalize_logs_request

    return partial(
        normalize_logs_request, conversation_id_keys=tuple(conversation_id_keys), tally=tally
    )


def assemble_records(
    records: Iterable[SpanRecord], *, prices: PriceBook | None = None
) -> list[Conversation]:
    """Conversations from a finite set of records: everything completes at end of input.
    `prices`: model prices for their costs (None: the price library's only)."""
    done = complete_all(records, CollectorInstruments.create(NoOpMeter("offline")))
    lost = sum(unjoined_events({(r.trace_id, r.span_id): r for r in c.records}) for c in done)
    if lost:
        log.warning("%d GenAI log events name a span that is not in the input: not used", lost)
    book = prices if prices is not None else DEFAULT_PRICES
    convs = [build_conversation(c.key, c.records, prices=book) for c in done]
    # Traces where no agent worked (only setup spans) build conversations without turns.
    convs = [c for c in convs if c.turns]
    convs.sort(key=lambda c: (min((t.start_ns or 0 for t in c.turns), default=0), c.id))
    return convs


def assemble_offline(
    requests: Iterable[ExportTraceServiceRequest | ExportLogsServiceRequest],
    *,
    conversation_id_keys: Sequence[str] = (),
    normalizer: Normalizer | None = None,
    prices: PriceBook | None = None,
) -> list[Conversation]:
    """Rebuild conversations from OTLP requests read from files (`tracepass
    conversations` / `tracepass evaluate`); logs requests carry GenAI events joined to
    their spans. Rejected spans are logged and skipped."""
    normalize = normalizer or default_normalizer(conversation_id_keys)
    normalize_logs = default_logs_normalizer(conversation_id_keys)
    records: list[SpanRecord] = []
    for request in requests:
        if isinstance(request, ExportLogsServiceRequest):
            recs, rejections = normalize_logs(request)
        else:
            recs, rejections = normalize(request)
        records.extend(recs)
        for rej in rejections:
            _rate_limited.warning(
                rej.reason, "span %s/%s skipped: %s", rej.trace_id, rej.span_id, rej.message
            )
    return assemble_records(records, prices=prices)
