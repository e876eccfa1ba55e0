"""Exemplars on /metrics: the OTel counters served with the latest conversation of each
series attached, in the OpenMetrics exposition only, label set within 128 characters."""

from __future__ import annotations

from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as openmetrics_latest

from tracepass.collector.export.exemplars import (
    MAX_EXEMPLAR_CHARS,
    ExemplarCollector,
    ExemplarStore,
)

LABELS = {"agent_name": "a", "agent_version": "1", "reference_set": "s", "outcome": "fail"}


def _served(store: ExemplarStore) -> tuple[CollectorRegistry, MeterProvider]:
    source = CollectorRegistry(auto_describe=True)
    provider = MeterProvider(metric_readers=[PrometheusMetricReader(registry=source)])
    served = CollectorRegistry()
    served.register(ExemplarCollector(source, store))
    return served, provider


def test_the_latest_conversation_is_the_exemplar_of_its_series() -> None:
    store = ExemplarStore(conversation_ids=True)
    served, provider = _served(store)
    counter = provider.get_meter("t").create_counter("tracepass_conversations")
    for cid, trace in (("c1", "aa" * 16), ("c2", "bb" * 16)):
        counter.add(1, LABELS)
        store.observe(
            "tracepass_conversations", LABELS, trace_id=trace, conversation_id=cid,
            value=1.0, timestamp=1000.0,
        )  # fmt: skip
    counter.add(1, {**LABELS, "outcome": "pass"})  # no exemplar recorded for this series
    text = openmetrics_latest(served).decode()
    fail_line = next(x for x in text.splitlines() if 'outcome="fail"' in x and "_total" in x)
    assert fail_line.endswith(f'2.0 # {{conversation_id="c2",trace_id="{"bb" * 16}"}} 1.0 1000.0')
    pass_line = next(x for x in text.splitlines() if 'outcome="pass"' in x and "_total" in x)
    assert "#" not in pass_line
    # The classic text format has no exemplars; the values are the same.
    assert 'outcome="fail"' in generate_latest(served).decode()
    provider.shutdown()


def test_trace_id_only_unless_configured() -> None:
    """Issue 21 #15: conversation ids can hold user data; /metrics readers get trace ids."""
    store = ExemplarStore()
    store.observe(
        "tracepass_conversations", LABELS, trace_id="ab" * 16, conversation_id="alice@example",
        value=1.0, timestamp=1.0,
    )  # fmt: skip
    exemplar = store.get("tracepass_conversations", LABELS)
    assert exemplar is not None
    assert exemplar.labels == {"trace_id": "ab" * 16}


def test_long_conversation_ids_are_shortened_to_the_openmetrics_limit() -> None:
    store = ExemplarStore(conversation_ids=True)
    store.observe(
        "tracepass_conversations", LABELS, trace_id="ab" * 16, conversation_id="x" * 300,
        value=1.0, timestamp=1.0,
    )  # fmt: skip
    exemplar = store.get("tracepass_conversations", LABELS)
    assert exemplar is not None
    size = sum(len(k) + len(v) for k, v in exemplar.labels.items())
    assert size == MAX_EXEMPLAR_CHARS
    assert exemplar.labels["conversation_id"].endswith("…")


def test_series_without_a_trace_get_no_exemplar() -> None:
    store = ExemplarStore()
    store.observe(
        "tracepass_conversations", LABELS, trace_id=None, conversation_id="c",
        value=1.0, timestamp=1.0,
    )  # fmt: skip
    assert store.get("tracepass_conversations", LABELS) is None
