"""Operational instruments of the collector, created once from an OpenTelemetry Meter.

Every stage that can lose or refuse data counts it here with a `reason`, so nothing
is dropped silently. Names are final Prometheus names minus the `_total` suffix the
exporter adds to counters; keep them stable (dashboards and alert rules use them).
Evaluation-result instruments live in `tracepass.collector.export.metrics`.
"""

from __future__ import annotations

from dataclasses import dataclass

from opentelemetry import metrics
from opentelemetry.metrics import Counter, Histogram, Meter, UpDownCounter


@dataclass(frozen=True)
class CollectorInstruments:
    export_requests: (
        Counter  # {protocol, signal, outcome}: ok | partial | invalid | too_large | ...
    )
    spans_received: Counter  # {protocol}
    spans_rejected: Counter  # {reason}
    log_records_received: Counter  # {protocol}
    log_records_rejected: Counter  # {reason}
    log_records_ignored: Counter  # log records that are no GenAI event (nothing to read)
    log_events_dropped: Counter  # {reason}: GenAI events given up (no_span: never joined)
    spans_dropped: Counter  # {reason}: buffered spans given up (eviction, retention)
    late_spans: Counter  # spans for an already evaluated conversation
    conversations_completed: (
        Counter  # {reason}: end_signal | reference_turns | idle | trace_grace | evicted
    )
    conversations_evicted: Counter  # {reason}
    conversations_unmatched: Counter
    reference_ids_unknown: Counter  # a conversation names a reference id no set has
    revisions: Counter
    open_conversations: UpDownCounter
    buffered_spans: UpDownCounter
    retained_spans: UpDownCounter
    ingest_seconds: Histogram
    spans_read: Counter  # {convention, adapter}: how normalization read each span
    fields_unreadable: Counter  # {field}: tool_arguments kept raw, tool_name missing
    # {scope}: spans no convention or custom mapping claimed (label-limited by scope).
    spans_unrecognized: Counter

    @classmethod
    def create(cls, meter: Meter | None = None) -> CollectorInstruments:
        m = meter or metrics.get_meter("tracepass.collector")
        return cls(
            export_requests=m.create_counter(
                "tracepass_export_requests", description="OTLP export requests by outcome"
            ),
            spans_received=m.create_counter(
                "tracepass_spans_received", description="Spans received over OTLP"
            ),
            spans_rejected=m.create_counter(
                "tracepass_spans_rejected", description="Spans refused, by reason"
            ),
            log_records_received=m.create_counter(
                "tracepass_log_records_received", description="Log records received over OTLP"
            ),
            log_records_rejected=m.create_counter(
                "tracepass_log_records_rejected", description="Log records refused, by reason"
            ),
            log_records_ignored=m.create_counter(
                "tracepass_log_records_ignored",
                description="Log records accepted but not read: not a GenAI event",
            ),
            log_events_dropped=m.create_counter(
                "tracepass_log_events_dropped",
                description="GenAI log events accepted and later given up, by reason",
            ),
            spans_dropped=m.create_counter(
                "tracepass_spans_dropped", description="Accepted spans later given up, by reason"
            ),
            late_spans=m.create_counter(
                "tracepass_late_spans",
                description="Spans arriving after their conversation was evaluated",
            ),
            conversations_completed=m.create_counter(
                "tracepass_conversations_completed",
                description="Conversations closed, by completion reason",
            ),
            conversations_evicted=m.create_counter(
                "tracepass_conversations_evicted",
                description="Conversations evicted before completion, by reason",
            ),
            conversations_unmatched=m.create_counter(
                "tracepass_conversations_unmatched",
                description="Completed conversations with no reference",
            ),
            reference_ids_unknown=m.create_counter(
                "tracepass_reference_id_unknown",
                description="Completed conversations whose reference_id names no loaded "
                "reference (then matched by their query, or not at all)",
            ),
            revisions=m.create_counter(
                "tracepass_revisions", description="Re-evaluations caused by late spans"
            ),
            open_conversations=m.create_up_down_counter(
                "tracepass_open_conversations", description="Conversations being assembled"
            ),
            buffered_spans=m.create_up_down_counter(
                "tracepass_buffered_spans",
                description="Spans held in open conversations (not yet evaluated)",
            ),
            retained_spans=m.create_up_down_counter(
                "tracepass_retained_spans",
                description="Spans of evaluated conversations kept for late spans until "
                "retention_s (in the state file with batch durability, packed with none)",
            ),
            ingest_seconds=m.create_histogram(
                "tracepass_ingest_duration",
                unit="s",
                description="Time to ingest one export request",
            ),
            spans_read=m.create_counter(
                "tracepass_spans_read",
                description="Spans normalized, by the convention and framework adapter that read them",
            ),
            fields_unreadable=m.create_counter(
                "tracepass_fields_unreadable",
                description="Spans with a field that could not be read, by field",
            ),
            spans_unrecognized=m.create_counter(
                "tracepass_spans_unrecognized",
                description="Spans no convention or custom mapping read, by instrumentation "
                "scope (a framework arriving unread)",
            ),
        )
