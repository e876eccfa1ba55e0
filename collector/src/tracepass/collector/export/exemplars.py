"""OpenMetrics exemplars on the outcome counters, so a Grafana panel can jump from a
failing series to one conversation and its trace.

Why not the OpenTelemetry SDK's own exemplars: the SDK samples exemplars only for
measurements made inside a sampled span (evaluation runs outside any span of the
agent's trace), and its Prometheus exporter (`opentelemetry-exporter-prometheus`) does
not write exemplars at all. So the counters stay what they are (same names, same values
on /metrics and over OTLP), and this module adds the exemplar at exposition:

- `ExemplarStore.observe` keeps, per counter series (metric name + label values), the
  latest evaluation's `trace_id` and `conversation_id`;
- `ExemplarCollector` is what the Prometheus registry serves: it collects the OTel
  reader's families from a private registry and attaches the stored exemplar to each
  matching `_total` sample. prometheus_client writes exemplars only in the OpenMetrics
  format, which Prometheus asks for when started with `--enable-feature=exemplar-storage`.

An exemplar carries the trace id only: conversation ids can hold user data and anyone
who scrapes /metrics would read them. `metrics.exemplar_conversation_ids: true` adds
the conversation id; OpenMetrics caps an exemplar's label set at 128 UTF-8 characters,
so it is then shortened (with "…") when the two labels would exceed it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from prometheus_client.registry import Collector, CollectorRegistry
from prometheus_client.samples import Exemplar

__all__ = ["EXEMPLAR_METRICS", "MAX_EXEMPLAR_CHARS", "ExemplarCollector", "ExemplarStore"]

# Counter name → the labels that identify its series (in this order).
EXEMPLAR_METRICS: Mapping[str, tuple[str, ...]] = {
    "tracepass_conversations": ("agent_name", "agent_version", "reference_set", "outcome"),
    "tracepass_turns": ("agent_name", "agent_version", "reference_set", "outcome"),
}
MAX_EXEMPLAR_CHARS = 128


def _exemplar_labels(trace_id: str, conversation_id: str) -> dict[str, str]:
    budget = MAX_EXEMPLAR_CHARS - len("trace_id") - len(trace_id) - len("conversation_id")
    if len(conversation_id) > budget:
        conversation_id = conversation_id[: max(budget - 1, 0)] + "…"
    return {"trace_id": trace_id, "conversation_id": conversation_id}


class ExemplarStore:
    """The latest (trace id, conversation id, time) per counter series; thread-safe
    (written by evaluations on the event loop, read by the scrape thread)."""

    def __init__(self, *, conversation_ids: bool = False) -> None:
        self.conversation_ids = conversation_ids
        self._lock = threading.Lock()
        # (metric, label values) → (trace id, conversation id, value, timestamp)
        self._latest: dict[tuple[str, tuple[str, ...]], tuple[str, str, float, float]] = {}

    def observe(
        self,
        metric: str,
        labels: Mapping[str, str],
        *,
        trace_id: str | None,
        conversation_id: str,
        value: float,
        timestamp: float,
    ) -> None:
        names = EXEMPLAR_METRICS.get(metric)
        if names is None:
            return
        values = tuple(str(labels.get(n, "")) for n in names)
        self.observe_many(
            ((metric, values, trace_id, value),),
            conversation_id=conversation_id,
            timestamp=timestamp,
        )

    def observe_many(
        self,
        series: Iterable[tuple[str, tuple[str, ...], str | None, float]],
        *,
        conversation_id: str,
        timestamp: float,
    ) -> None:
        """One conversation's exemplars: (metric, label values in `EXEMPLAR_METRICS`
        order, trace id, value) per series, in order (a later one of the same series
        wins). Kept raw: the `Exemplar` is built when a scrape asks for it."""
        with self._lock:
            latest = self._latest
            for metric, values, trace_id, value in series:
                if trace_id and metric in EXEMPLAR_METRICS:
                    latest[(metric, values)] = (trace_id, conversation_id, value, timestamp)

    def latest(self, metric: str) -> list[tuple[dict[str, str], str, str]]:
        """(series labels, trace id, conversation id) of every series of `metric` that
        holds an exemplar (a snapshot, for gauges that show them as labels)."""
        names = EXEMPLAR_METRICS.get(metric, ())
        with self._lock:
            items = [(v, raw) for (m, v), raw in self._latest.items() if m == metric]
        return [(dict(zip(names, v, strict=True)), raw[0], raw[1]) for v, raw in items]

    def get(self, metric: str, labels: Mapping[str, str]) -> Exemplar | None:
        names = EXEMPLAR_METRICS.get(metric)
        if names is None:
            return None
        with self._lock:
            raw = self._latest.get((metric, tuple(str(labels.get(n, "")) for n in names)))
        if raw is None:
            return None
        trace_id, conversation_id, value, timestamp = raw
        if not self.conversation_ids:
            return Exemplar({"trace_id": trace_id}, value, timestamp)
        return Exemplar(_exemplar_labels(trace_id, conversation_id), value, timestamp)


class ExemplarCollector(Collector):
    """Serves `source`'s metric families with the stored exemplars attached."""

    def __init__(self, source: CollectorRegistry, store: ExemplarStore) -> None:
        self._source = source
        self._store = store

    def collect(self) -> Iterable[Any]:
        for family in self._source.collect():
            if family.name in EXEMPLAR_METRICS:
                family.samples = self._attach(family.name, family.samples)
            yield family

    def _attach(self, metric: str, samples: Sequence[Any]) -> list[Any]:
        out = []
        for sample in samples:
            if sample.name == metric + "_total" and sample.exemplar is None:
                exemplar = self._store.get(metric, sample.labels)
                if exemplar is not None:
                    sample = sample._replace(exemplar=exemplar)
            out.append(sample)
        return out
