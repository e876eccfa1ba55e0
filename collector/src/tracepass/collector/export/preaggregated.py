"""Light counters and histograms for the per-conversation hot path, exported through
the OpenTelemetry SDK's own metric readers under the same names.

Why: every evaluated conversation updates ≈ 26 counter and histogram series. Through the
SDK each update costs ≈ 7.5 µs (attribute cleaning and hashing, a `Measurement`, one
storage and aggregation per reader): ≈ 230 µs per 3-turn conversation, more than
scoring it. Here an update is a dict lookup and a few additions on a label tuple
(≈ 0.3 µs); the work the SDK does per measurement is done once per series per
collection instead.

How it reaches the exporters: the Python SDK has no public metric producer, so
`attach` wraps the collect callback the MeterProvider gives each of its readers (the
one `MetricReader.collect` calls; Prometheus pull, OTLP push, in-memory test readers
alike) and appends these instruments' points, as the SDK's own `Metric` / `Sum` /
`Histogram` data, to the `ScopeMetrics` of the meter's instrumentation scope. What a
reader receives is what the SDK would have produced for the same measurements:

* counters: monotonic `Sum` points; histograms: explicit-bucket `Histogram` points
  with the same boundaries and bucket placement (a value goes in the first bucket whose
  upper bound is >= the value: `bisect_left`, as the SDK), sum, count, min and max;
* the reader's temporality preference for counters and histograms (CUMULATIVE, or
  DELTA e.g. from OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE), the SDK's start
  and end times, its cardinality limit (extra series fold into the
  `otel.metric.overflow=true` point), and its rule that negative or non-finite values
  are dropped with a warning;
* no exemplars: the SDK samples them only inside a sampled span, and evaluation runs
  outside any span.

Measurements go into one `pending` map per instrument; a collection by any reader folds
the pending maps into every reader's own accumulation (cumulative, or since that
reader's last collection for DELTA), so recording costs the same for any number of
readers and a DELTA reader's min and max are those of its own interval.

`attach` returns None where these semantics cannot be kept (a meter that is not the
SDK's, a provider with views or always-on exemplars, a reader asking for another
aggregation than the SDK's default for these instruments, an SDK whose internals
moved): callers then record through the SDK instruments (`SdkInstruments`), same names.
The hook is checked by tests/collector/test_preaggregated.py, and collector/pyproject
bounds opentelemetry-sdk to the versions it was checked with.
"""

from __future__ import annotations

import itertools
import logging
import math
import threading
import weakref
from bisect import bisect_left
from collections.abc import Callable, Sequence
from time import time_ns
from typing import Any, Protocol

from opentelemetry.metrics import Meter
from opentelemetry.sdk.metrics import AlwaysOnExemplarFilter
from opentelemetry.sdk.metrics._internal.instrument import _Counter, _Histogram
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    Histogram,
    HistogramDataPoint,
    Metric,
    MetricReader,
    MetricsData,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
    Sum,
)
from opentelemetry.sdk.metrics.view import (
    DefaultAggregation,
    ExplicitBucketHistogramAggregation,
    SumAggregation,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

__all__ = [
    "HotCounter",
    "HotHistogram",
    "HotMetrics",
    "Instruments",
    "SdkInstruments",
    "attach",
]

_log = logging.getLogger(__name__)

Key = tuple[str, ...]
OVERFLOW_KEY: Key = ("\x00otel.metric.overflow",)
OVERFLOW_ATTRIBUTES: dict[str, Any] = {"otel.metric.overflow": True}
DEFAULT_CARDINALITY_LIMIT = 2000  # the SDK's default per instrument and reader

# A histogram series: [sum, min, max, count of bucket 0, ..., count of bucket n].
_SUM, _MIN, _MAX, _BUCKETS = 0, 1, 2, 3


class AddCounter(Protocol):
    def add(self, amount: int | float, key: Key) -> None: ...


class RecordHistogram(Protocol):
    def record(self, amount: float, key: Key) -> None: ...


class Instruments(Protocol):
    """What `EvaluationMetrics` records through: light instruments or SDK ones."""

    lock: Any  # a context manager held around one conversation's updates

    def counter(
        self, name: str, description: str, labels: Sequence[str], unit: str = ""
    ) -> AddCounter: ...

    def histogram(
        self,
        name: str,
        description: str,
        labels: Sequence[str],
        boundaries: Sequence[float],
        unit: str = "",
    ) -> RecordHistogram: ...


class HotCounter:
    """A monotonic counter keyed by label-value tuples. `add` must run under the owning
    `HotMetrics.lock` (the caller takes it once for all its updates)."""

    __slots__ = ("_pending", "_start", "description", "labels", "name", "unit")

    def __init__(self, name: str, description: str, labels: Sequence[str], unit: str) -> None:
        self.name = name
        self.description = description
        self.unit = unit
        self.labels = tuple(labels)
        self._pending: dict[Key, int | float] = {}
        self._start: dict[Key, int] = {}  # first measurement of each series (ns)

    def add(self, amount: int | float, key: Key) -> None:
        if not 0 <= amount < math.inf:
            _log.warning("Add amount %s is not finite and >= 0 on %s, ignored", amount, self.name)
            return
        pending = self._pending
        old = pending.get(key)
        if old is None:
            pending[key] = amount
            if key not in self._start:
                self._start[key] = time_ns()
        else:
            pending[key] = old + amount


class HotHistogram:
    """An explicit-bucket histogram keyed by label-value tuples; `record` under the lock."""

    __slots__ = ("_pending", "_start", "boundaries", "description", "labels", "name", "unit")

    def __init__(
        self,
        name: str,
        description: str,
        labels: Sequence[str],
        boundaries: Sequence[float],
        unit: str,
    ) -> None:
        bounds = tuple(float(b) for b in boundaries)
        if any(not math.isfinite(b) for b in bounds) or any(
            a >= b for a, b in itertools.pairwise(bounds)
        ):
            raise ValueError(f"boundaries must be finite and strictly increasing: {boundaries}")
        self.name = name
        self.description = description
        self.unit = unit
        self.labels = tuple(labels)
        self.boundaries = tuple(boundaries)
        self._pending: dict[Key, list[Any]] = {}
        self._start: dict[Key, int] = {}

    def record(self, amount: float, key: Key) -> None:
        if not 0 <= amount < math.inf:
            _log.warning(
                "Record amount %s is not finite and >= 0 on %s, ignored", amount, self.name
            )
            return
        state = self._pending.get(key)
        if state is None:
            state = self._pending[key] = [0, math.inf, -math.inf] + [0] * (len(self.boundaries) + 1)
            if key not in self._start:
                self._start[key] = time_ns()
        state[_SUM] += amount
        if amount < state[_MIN]:
            state[_MIN] = amount
        if amount > state[_MAX]:
            state[_MAX] = amount
        state[_BUCKETS + bisect_left(self.boundaries, amount)] += 1


Hot = HotCounter | HotHistogram


class _ReaderState:
    """One reader's accumulation of every instrument (cumulative, or since its last
    collection for DELTA), its temporalities and cardinality limits."""

    def __init__(self, reader: MetricReader) -> None:
        temporality = reader._instrument_class_temporality
        self.counter_delta = temporality[_Counter] is AggregationTemporality.DELTA
        self.histogram_delta = temporality[_Histogram] is AggregationTemporality.DELTA
        limits = getattr(reader, "_instrument_class_cardinality_limit", {})
        self.counter_limit = int(limits.get(_Counter, DEFAULT_CARDINALITY_LIMIT))
        self.histogram_limit = int(limits.get(_Histogram, DEFAULT_CARDINALITY_LIMIT))
        self.series: dict[str, dict[Key, Any]] = {}
        self.starts: dict[str, dict[Key, int]] = {}
        self.last_ns: int | None = None

    def fold(self, hot: Hot, pending: dict[Key, Any]) -> None:
        acc = self.series.setdefault(hot.name, {})
        starts = self.starts.setdefault(hot.name, {})
        histogram = isinstance(hot, HotHistogram)
        limit = self.histogram_limit if histogram else self.counter_limit
        for key, value in pending.items():
            if key not in acc and len(acc) >= limit:
                key = OVERFLOW_KEY
            if key not in starts:
                starts[key] = hot._start.get(key, time_ns())
            old = acc.get(key)
            if not histogram:
                acc[key] = value if old is None else value + old
            elif old is None:
                acc[key] = list(value)
            else:
                old[_SUM] = value[_SUM] + old[_SUM]
                old[_MIN] = min(value[_MIN], old[_MIN])
                old[_MAX] = max(value[_MAX], old[_MAX])
                for i in range(_BUCKETS, len(old)):
                    old[i] += value[i]

    def take(self, hot: Hot) -> tuple[dict[Key, Any], dict[Key, int]]:
        """This reader's series of `hot` to export now, as a copy (a DELTA reader's
        interval is handed over and starts again empty, as the SDK's does)."""
        acc = self.series.get(hot.name)
        if not acc:
            return {}, {}
        starts = dict(self.starts[hot.name])
        if self.counter_delta if isinstance(hot, HotCounter) else self.histogram_delta:
            self.series[hot.name] = {}
            return acc, starts
        if isinstance(hot, HotCounter):
            return dict(acc), starts
        return {key: tuple(series) for key, series in acc.items()}, starts


class HotMetrics:
    """The light instruments of one meter (one instrumentation scope of one provider)."""

    def __init__(self, scope: InstrumentationScope, resource: Resource) -> None:
        self.scope = scope
        self.resource = resource
        self.lock = threading.Lock()  # held around recording and collection
        self._create_lock = threading.Lock()
        self._instruments: dict[str, Hot] = {}
        self._readers: weakref.WeakKeyDictionary[MetricReader, _ReaderState] = (
            weakref.WeakKeyDictionary()
        )

    def counter(
        self, name: str, description: str, labels: Sequence[str], unit: str = ""
    ) -> HotCounter:
        with self._create_lock:
            existing = self._instruments.get(name)
            if isinstance(existing, HotCounter):
                return existing
            counter = HotCounter(name, description, labels, unit)
            # copy on write: a collection iterates the dict it read, without `lock`
            # (so creating an instrument while holding `lock` cannot deadlock)
            self._instruments = {**self._instruments, name: counter}
            return counter

    def histogram(
        self,
        name: str,
        description: str,
        labels: Sequence[str],
        boundaries: Sequence[float],
        unit: str = "",
    ) -> HotHistogram:
        with self._create_lock:
            existing = self._instruments.get(name)
            if isinstance(existing, HotHistogram):
                return existing
            histogram = HotHistogram(name, description, labels, boundaries, unit)
            self._instruments = {**self._instruments, name: histogram}
            return histogram

    def add_reader(self, reader: MetricReader) -> None:
        with self.lock:
            if reader not in self._readers:
                self._readers[reader] = _ReaderState(reader)

    def collect(
        self, reader: MetricReader, registered: Sequence[MetricReader] = ()
    ) -> list[Metric]:
        """This reader's points of every instrument that has any, as the SDK builds them.
        `registered`: the provider's readers now (one added to the provider since the
        last collection starts accumulating here, one removed stops)."""
        now = time_ns()
        with self.lock:
            if registered:
                for gone in [r for r in self._readers if r not in registered]:
                    del self._readers[gone]
                for new in registered:
                    if new not in self._readers:
                        self._readers[new] = _ReaderState(new)
            state = self._readers.get(reader)
            if state is None:
                state = self._readers[reader] = _ReaderState(reader)
            readers = list(self._readers.values())
            instruments = self._instruments
            for hot in instruments.values():
                if hot._pending:
                    pending, hot._pending = hot._pending, {}
                    for each in readers:
                        each.fold(hot, pending)
            taken = [(hot, *state.take(hot)) for hot in instruments.values()]
            last_ns, state.last_ns = state.last_ns, now
        # The points are built outside the lock: recording never waits for that.
        return [
            m for hot, acc, starts in taken if (m := _metric(hot, acc, starts, state, last_ns, now))
        ]


def _attributes(labels: tuple[str, ...], key: Key) -> dict[str, Any]:
    if key == OVERFLOW_KEY:
        return dict(OVERFLOW_ATTRIBUTES)
    return dict(zip(labels, key, strict=True))


def _metric(
    hot: Hot,
    acc: dict[Key, Any],
    starts: dict[Key, int],
    state: _ReaderState,
    last_ns: int | None,
    now: int,
) -> Metric | None:
    """The SDK's `Metric` for these series. Start times as the SDK's: a cumulative
    series' first measurement; a DELTA interval starts at the reader's previous
    collection (or, before any, at the series' first measurement)."""
    if not acc:
        return None
    data: Sum | Histogram
    if isinstance(hot, HotCounter):
        delta = state.counter_delta
        data = Sum(
            data_points=[
                NumberDataPoint(
                    attributes=_attributes(hot.labels, key),
                    start_time_unix_nano=last_ns if delta and last_ns else starts[key],
                    time_unix_nano=now,
                    value=value,
                )
                for key, value in acc.items()
            ],
            aggregation_temporality=_TEMPORALITY[delta],
            is_monotonic=True,
        )
    else:
        delta = state.histogram_delta
        points = []
        for key, series in acc.items():
            buckets = tuple(series[_BUCKETS:])
            points.append(
                HistogramDataPoint(
                    attributes=_attributes(hot.labels, key),
                    start_time_unix_nano=last_ns if delta and last_ns else starts[key],
                    time_unix_nano=now,
                    count=sum(buckets),
                    sum=series[_SUM],
                    bucket_counts=buckets,
                    explicit_bounds=hot.boundaries,
                    min=series[_MIN],
                    max=series[_MAX],
                )
            )
        data = Histogram(data_points=points, aggregation_temporality=_TEMPORALITY[delta])
    return Metric(name=hot.name, description=hot.description, unit=hot.unit, data=data)


_TEMPORALITY = {True: AggregationTemporality.DELTA, False: AggregationTemporality.CUMULATIVE}


# ---------------------------------------------------------------------------- the hook

Collect = Callable[..., MetricsData | None]


class _ProviderHook:
    """The wrapper around one provider's collect callback: the SDK's data of a
    collection plus the light instruments' points for the collecting reader."""

    def __init__(self, consumer: Any, original: Collect) -> None:
        self._consumer = consumer
        self._original = original
        self.stores: dict[InstrumentationScope, HotMetrics] = {}
        self._lock = threading.Lock()

    def __call__(self, reader: MetricReader, timeout_millis: float = 10_000) -> MetricsData | None:
        data = self._original(reader, timeout_millis=timeout_millis)
        with self._lock:
            stores = list(self.stores.values())
        registered = list(self._consumer._reader_storages)
        extra = [(store, store.collect(reader, registered)) for store in stores]
        extra = [(store, metrics) for store, metrics in extra if metrics]
        if not extra:
            return data
        return _merge(data, extra)


def _merge(data: MetricsData | None, extra: list[tuple[HotMetrics, list[Metric]]]) -> MetricsData:
    resource = extra[0][0].resource
    if data is None or not data.resource_metrics:
        resource_metrics = [ResourceMetrics(resource, [], resource.schema_url)]
    else:
        resource_metrics = list(data.resource_metrics)
    first = resource_metrics[0]
    scopes = list(first.scope_metrics)
    for store, metrics in extra:
        for i, sm in enumerate(scopes):
            if sm.scope == store.scope:
                scopes[i] = ScopeMetrics(sm.scope, [*sm.metrics, *metrics], sm.schema_url)
                break
        else:
            scopes.append(ScopeMetrics(store.scope, metrics, store.scope.schema_url or ""))
    resource_metrics[0] = ResourceMetrics(first.resource, scopes, first.schema_url)
    return MetricsData(resource_metrics=resource_metrics)


_hooks: weakref.WeakKeyDictionary[Any, _ProviderHook] = weakref.WeakKeyDictionary()
_hooks_lock = threading.Lock()


def _supported(consumer: Any) -> bool:
    """Whether the light instruments can export exactly what the SDK would: no views,
    and on every reader the aggregation the SDK would give these instruments anyway (the
    default, or the sum / explicit-bucket aggregation without its own boundaries that
    the OTLP exporters ask for)."""
    config = consumer._sdk_config
    if config.views or isinstance(config.exemplar_filter, AlwaysOnExemplarFilter):
        return False  # always-on exemplars (OTEL_METRICS_EXEMPLAR_FILTER): the SDK's
    for reader in consumer._reader_storages:
        aggregation = reader._instrument_class_aggregation
        counter, histogram = aggregation[_Counter], aggregation[_Histogram]
        if not isinstance(counter, DefaultAggregation | SumAggregation):
            return False
        if isinstance(histogram, DefaultAggregation):
            continue
        if not isinstance(histogram, ExplicitBucketHistogramAggregation):
            return False
        if histogram._boundaries is not None or not histogram._record_min_max:
            return False
    return True


def attach(meter: Meter) -> HotMetrics | None:
    """The light instruments exported through `meter`'s provider and readers, or None
    when that cannot keep the SDK's output (then record through the SDK)."""
    try:
        consumer = meter._measurement_consumer  # type: ignore[attr-defined]
        scope: InstrumentationScope = meter._instrumentation_scope  # type: ignore[attr-defined]
        resource: Resource = consumer._sdk_config.resource
        readers = list(consumer._reader_storages)
        if not _supported(consumer):
            return None
        with _hooks_lock:
            hook = _hooks.get(consumer)
            if hook is None:
                # Readers added to the provider later pick up the wrapped callback too:
                # MeterProvider.add_metric_reader reads `consumer.collect`.
                hook = _ProviderHook(consumer, consumer.collect)
                consumer.collect = hook
                _hooks[consumer] = hook
            for reader in readers:
                if reader._collect is not hook:
                    reader._set_collect_callback(hook)
            store = hook.stores.get(scope)
            if store is None:
                store = hook.stores[scope] = HotMetrics(scope, resource)
        for reader in readers:
            store.add_reader(reader)
        return store
    except (AttributeError, KeyError, TypeError) as exc:
        _log.warning("metrics recorded through the OpenTelemetry SDK (no light path: %r)", exc)
        return None


# ------------------------------------------------------------------- the SDK fallback


class _NoLock:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *_: object) -> None:
        return None


class _SdkCounter:
    __slots__ = ("_counter", "_labels")

    def __init__(self, counter: Any, labels: Sequence[str]) -> None:
        self._counter = counter
        self._labels = tuple(labels)

    def add(self, amount: int | float, key: Key) -> None:
        self._counter.add(amount, dict(zip(self._labels, key, strict=True)))


class _SdkHistogram:
    __slots__ = ("_histogram", "_labels")

    def __init__(self, histogram: Any, labels: Sequence[str]) -> None:
        self._histogram = histogram
        self._labels = tuple(labels)

    def record(self, amount: float, key: Key) -> None:
        self._histogram.record(amount, dict(zip(self._labels, key, strict=True)))


class SdkInstruments:
    """The same interface over the meter's own instruments (any Meter, no-op included)."""

    def __init__(self, meter: Meter) -> None:
        self._meter = meter
        self.lock = _NoLock()

    def counter(
        self, name: str, description: str, labels: Sequence[str], unit: str = ""
    ) -> _SdkCounter:
        return _SdkCounter(
            self._meter.create_counter(name, unit=unit, description=description), labels
        )

    def histogram(
        self,
        name: str,
        description: str,
        labels: Sequence[str],
        boundaries: Sequence[float],
        unit: str = "",
    ) -> _SdkHistogram:
        return _SdkHistogram(
            self._meter.create_histogram(
                name,
                unit=unit,
                description=description,
                explicit_bucket_boundaries_advisory=boundaries,
            ),
            labels,
        )
