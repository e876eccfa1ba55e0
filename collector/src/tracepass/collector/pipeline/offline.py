"""Offline use of the live stages: rebuild conversations from a finite set of OTLP
requests or records (`tracepass conversations`, `tracepass evaluate`), everything
completing at end of input."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from functools import partial

from opentelemetry.metrics import NoOpMeter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracepass.collector.assembly import Assembler, Reason, build_conversation
from tracepass.collector.config import AssemblyConfig
from tracepass.collector.instruments import CollectorInstruments
from tracepass.collector.normalize.records import Rejection, SpanRecord
from tracepass.evaluator.models import Conversation

__all__ = ["Normalizer", "assemble_offline", "assemble_records", "default_normalizer"]

log = logging.getLogger(__name__)

Normalizer = Callable[[ExportTraceServiceRequest], tuple[list[SpanRecord], list[Rejection]]]


def default_normalizer(conversation_id_keys: Sequence[str] = ()) -> Normalizer:
    # Imported late so that assembly can be used (and tested) on records alone.
    from tracepass.collector.normalize import normalize_request

    return partial(normalize_request, conversation_id_keys=tuple(conversation_id_keys))


def assemble_records(records: Iterable[SpanRecord]) -> list[Conversation]:
    """Conversations from a finite set of records: everything completes at end of input."""
    big = 2**62
    config = AssemblyConfig(
        max_open_conversations=big, max_buffered_spans=big, max_spans_per_conversation=big
    )
    asm = Assembler(config, CollectorInstruments.create(NoOpMeter("offline")), clock=lambda: 0.0)
    asm.add(records)
    done = asm.poll(0.0) + asm.flush_all(Reason.SHUTDOWN)
    convs = [build_conversation(c.key, c.records) for c in done]
    convs.sort(key=lambda c: (min((t.start_ns or 0 for t in c.turns), default=0), c.id))
    return convs


def assemble_offline(
    requests: Iterable[ExportTraceServiceRequest],
    *,
    conversation_id_keys: Sequence[str] = (),
    normalizer: Normalizer | None = None,
) -> list[Conversation]:
    """Rebuild conversations from OTLP requests read from files (`tracepass
    conversations` / `tracepass evaluate`). Rejected spans are logged and skipped."""
    normalize = normalizer or default_normalizer(conversation_id_keys)
    records: list[SpanRecord] = []
    for request in requests:
        recs, rejections = normalize(request)
        records.extend(recs)
        for rej in rejections:
            log.warning("span %s/%s skipped: %s", rej.trace_id, rej.span_id, rej.message)
    return assemble_records(records)
