"""The light hot-path instruments (`export/preaggregated.py`) export exactly what the
OpenTelemetry SDK's instruments export for the same measurements: the same sequence of
evaluation results is recorded through both paths and the collected data compared —
Prometheus text (classic and OpenMetrics with exemplars) and in-memory reader points,
cumulative and DELTA — apart from timestamps. Also: the SDK hook this relies on is where
it was (a failure here means the SDK changed its internals: re-check `preaggregated.py`
before raising the version bound in collector/pyproject.toml)."""

from __future__ import annotations

import math
import threading
import urllib.request
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry import metrics as otel_metrics
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import AlwaysOnExemplarFilter, Counter, Histogram, MeterProvider
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    InMemoryMetricReader,
    MetricExporter,
    MetricExportResult,
    MetricReader,
    MetricsData,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.metrics.view import (
    ExplicitBucketHistogramAggregation,
    ExponentialBucketHistogramAggregation,
    View,
)
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest

from tracepass.collector.config import MetricsConfig
from tracepass.collector.export.conversation_counts import LAG_BUCKETS, SCORE_BUCKETS
from tracepass.collector.export.metrics import EvaluationMetrics
from tracepass.collector.export.preaggregated import HotMetrics, attach
from tracepass.collector.export.telemetry import Telemetry, build_telemetry
from tracepass.collector.export.windows import replay_result
from tracepass.evaluator.models import (
    Conversation,
    ConversationResult,
    GraderResult,
    Outcome,
    ToolCall,
    ToolCorrectness,
    TrajectoryScores,
    Turn,
    TurnResult,
    Violation,
)

OUTCOMES = (Outcome.PASS, Outcome.FAIL, Outcome.ERROR, Outcome.UNSCORED, Outcome.INCOMPLETE)
DELTA = {Counter: AggregationTemporality.DELTA, Histogram: AggregationTemporality.DELTA}


def make_result(
    i: int, *, outcome: Outcome | None = None
) -> tuple[ConversationResult, Conversation]:
    """A varied result: 1-3 turns, pass / fail / unscored turns, missing scores,
    violations, several agents (beyond a label limit of 3), scores on bucket bounds."""
    out = outcome or OUTCOMES[i % len(OUTCOMES)]
    turns = []
    for t in range(1 + i % 3):
        correct = None if (i + t) % 7 == 0 else (i + t) % 4 != 0
        score = (0.1, 0.95, 1.0, 0.0, 0.3333, 0.05, 1)[(i + t) % 7]
        turns.append(
            TurnResult(
                index=t,
                query="q",
                answer="a",
                answer_score=1.0,
                answer_correct=correct,
                graders=(GraderResult(grader="exact", score=1.0, passed=True, reasoning="r"),),
                tool_correctness=None
                if (i + t) % 5 == 0
                else ToolCorrectness(
                    selection=score,
                    parameters=0.5,
                    sequence=1.0,
                    utilization=0.9,
                    overall=(score + 0.5) / 2,
                    correct=bool(correct),
                ),
                trajectory=None
                if (i + t) % 6 == 0
                else TrajectoryScores(
                    exact=True, in_order=True, any_order=True, precision=score, recall=0.2, f1=0.3
                ),
                tool_calls=tuple(ToolCall(name=f"t{k}") for k in range((i + t) % 4)),
                correct=correct,
            )
        )
    violations = tuple(
        Violation(
            rule=("order", "unknown_tool", "made_up")[k % 3], turn=0, tool_call=None, message="m"
        )
        for k in range(i % 4)
    )
    result = ConversationResult(
        conversation_id=f"c{i % 40}",
        reference_id=None if i % 9 == 0 else f"task{i % 5}",
        reference_set="refs" if i % 11 else None,
        agent_name=f"agent{i % 5}",
        agent_version="1.0" if i % 3 else "2.0",
        correct=out is Outcome.PASS,
        outcome=out,
        turns=tuple(turns),
        violations=violations,
    )
    conv = Conversation(
        id=result.conversation_id,
        turns=tuple(Turn(query="q", trace_id=f"{i:016x}{t:016x}") for t in range(len(turns))),
    )
    return result, conv


class Clock:
    def __init__(self) -> None:
        self.t = 1_700_000_000.0

    def __call__(self) -> float:
        return self.t


class Stack:
    """build_telemetry (Prometheus on port 0) + a cumulative and a DELTA in-memory reader."""

    def __init__(self, *, preaggregate: bool) -> None:
        self.config = MetricsConfig(
            prometheus_host="127.0.0.1", prometheus_port=0, label_limit=3, min_conversations=1
        )
        self.cumulative = InMemoryMetricReader()
        # as the OTLP exporters configure their reader, with the delta preference
        self.delta = InMemoryMetricReader(
            preferred_temporality=DELTA,
            preferred_aggregation={Histogram: ExplicitBucketHistogramAggregation()},
        )
        self.tel: Telemetry = build_telemetry(
            self.config, extra_readers=[self.cumulative, self.delta]
        )
        self.clock = Clock()
        self.em = EvaluationMetrics(
            self.tel.meter(),
            self.config,
            clock=self.clock,
            exemplars=self.tel.exemplars,
            preaggregate=preaggregate,
        )
        assert (self.em.hot is not None) is preaggregate

    def run(self, start: int, stop: int) -> None:
        for i in range(start, stop):
            result, conv = make_result(i)
            # revisions: conversation ids repeat every 40 results (supersede), and every
            # 13th is sent again with the same revision (stale: ignored)
            revision = i // 40
            lag = (0.05, 2.0, -1.0, math.inf, None, 3600.0, 7200.0, 0.5)[i % 8]
            self.em.record(
                result, revision=revision, lag_s=lag, now=self.clock.t, conversation=conv
            )
            if i % 13 == 0:
                self.em.record(result, revision=revision, now=self.clock.t, conversation=conv)
            self.clock.t += 1.0

    def scrape(self, openmetrics: bool = False) -> str:
        assert self.tel.prometheus_url is not None
        req = urllib.request.Request(self.tel.prometheus_url)
        if openmetrics:
            req.add_header("Accept", "application/openmetrics-text; version=1.0.0")
        with urllib.request.urlopen(req, timeout=10) as resp:
            return str(resp.read().decode())


@pytest.fixture
def stacks() -> Iterator[tuple[Stack, Stack]]:
    sdk, hot = Stack(preaggregate=False), Stack(preaggregate=True)
    yield sdk, hot
    sdk.tel.shutdown()
    hot.tel.shutdown()


def points(data: MetricsData | None) -> dict[tuple[str, str], Any]:
    """Every metric of the collection, timestamps left out, value types kept (an int
    count exports as OTLP as_int, a float as as_double)."""
    out: dict[tuple[str, str], Any] = {}
    if data is None:
        return out
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                d: Any = metric.data
                rows = []
                for p in d.data_points:
                    attrs = tuple(p.attributes.items())
                    if hasattr(p, "bucket_counts"):
                        rows.append(
                            (attrs, p.count, p.sum, type(p.sum), tuple(p.bucket_counts),
                             tuple(p.explicit_bounds), p.min, p.max, len(p.exemplars))
                        )  # fmt: skip
                    else:
                        rows.append((attrs, p.value, type(p.value), len(p.exemplars)))
                out[(sm.scope.name, metric.name)] = (
                    metric.description,
                    metric.unit,
                    type(d).__name__,
                    getattr(d, "aggregation_temporality", None),
                    getattr(d, "is_monotonic", None),
                    rows,
                    rm.resource.attributes,
                )
    return out


def test_same_output_as_the_sdk_instruments(stacks: tuple[Stack, Stack]) -> None:
    sdk, hot = stacks
    for start, stop in ((0, 60), (60, 61), (61, 61), (61, 130)):
        sdk.run(start, stop)
        hot.run(start, stop)
        # Prometheus: same families, samples, HELP and TYPE lines (families may come in
        # another order: the light instruments follow the SDK's in the collection).
        assert sorted(sdk.scrape().splitlines()) == sorted(hot.scrape().splitlines())
        om_sdk, om_hot = sdk.scrape(openmetrics=True), hot.scrape(openmetrics=True)
        assert sorted(om_sdk.splitlines()) == sorted(om_hot.splitlines())
        assert "trace_id=" in om_hot
        for reader in ("cumulative", "delta"):
            got_sdk = points(getattr(sdk, reader).get_metrics_data())
            got_hot = points(getattr(hot, reader).get_metrics_data())
            assert got_sdk == got_hot, reader
    text = hot.scrape()
    for name in (
        "tracepass_conversations_total",
        "tracepass_conversations_superseded_total",
        "tracepass_turns_superseded_total",
        "tracepass_policy_violations_superseded_total",
        "tracepass_tool_correctness_bucket",
        "tracepass_evaluation_lag_seconds_bucket",
        "tracepass_label_overflow_total",
        "tracepass_evaluations_ignored_total",
    ):
        assert name in text, name


def test_replay_does_not_count_again(stacks: tuple[Stack, Stack]) -> None:
    _, hot = stacks
    result, _ = make_result(1, outcome=Outcome.PASS)
    assert replay_result(hot.em, result, revision=0, now=hot.clock.t)
    assert "tracepass_conversations_total" not in hot.scrape()
    assert hot.em.record(result, revision=1, now=hot.clock.t)
    text = hot.scrape()
    assert "tracepass_conversations_total{" in text
    assert "tracepass_conversations_superseded_total{" in text


# ------------------------------------------------------------------------- bucket placement

finite = st.floats(min_value=-10, max_value=10_000, allow_nan=False)
edges = st.sampled_from([*SCORE_BUCKETS, *LAG_BUCKETS, 0.0, -0.0, 1e-300, math.nextafter(1.0, 2)])
values = st.lists(st.one_of(finite, edges, st.just(math.inf), st.just(math.nan)), max_size=40)


def _histogram_points(values: Sequence[float], *, light: bool, bounds: Sequence[float]) -> Any:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    meter = provider.get_meter("t")
    if light:
        store = attach(meter)
        assert store is not None
        h = store.histogram("h", "d", ("k",), bounds)
        for v in values:
            with store.lock:
                h.record(v, ("x",))
    else:
        sdk = meter.create_histogram(
            "h", description="d", explicit_bucket_boundaries_advisory=bounds
        )
        for v in values:
            sdk.record(v, {"k": "x"})
    got = points(reader.get_metrics_data())
    provider.shutdown()
    return got


@settings(max_examples=200, deadline=None)
@given(values=values, lag=st.booleans())
def test_bucket_placement_sum_min_max_match_the_sdk(values: list[float], lag: bool) -> None:
    bounds = LAG_BUCKETS if lag else SCORE_BUCKETS
    assert _histogram_points(values, light=True, bounds=bounds) == _histogram_points(
        values, light=False, bounds=bounds
    )


# ------------------------------------------------------------------------------ the SDK hook


def _provider(*readers: MetricReader, **kw: Any) -> tuple[MeterProvider, HotMetrics | None]:
    provider = MeterProvider(metric_readers=list(readers), **kw)
    return provider, attach(provider.get_meter("tracepass.collector"))


def test_the_sdk_hook_is_where_it_was() -> None:
    """Fails loudly when the SDK moves what `attach` relies on."""
    from opentelemetry.sdk.metrics._internal.measurement_consumer import (
        SynchronousMeasurementConsumer,
    )

    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    meter: Any = provider.get_meter("tracepass.collector")
    consumer = meter._measurement_consumer
    assert isinstance(consumer, SynchronousMeasurementConsumer)
    assert list(consumer._reader_storages) == [reader]
    assert not consumer._sdk_config.views
    assert reader._collect == consumer.collect
    store = attach(meter)
    assert store is not None, "the light metrics path is off: see the warning logged"
    assert reader._collect is consumer.collect  # the hook replaced the callback
    store.counter("tracepass_x", "x", ("a",)).add(2, ("1",))
    got = points(reader.get_metrics_data())
    assert got[("tracepass.collector", "tracepass_x")][5] == [((("a", "1"),), 2, int, 0)]
    provider.shutdown()


def test_every_reader_kind_receives_the_light_metrics() -> None:
    class Exporter(MetricExporter):
        def __init__(self) -> None:
            super().__init__()
            self.exported: list[MetricsData] = []

        def export(self, metrics_data: MetricsData, timeout_millis: float = 0, **_: Any) -> Any:
            self.exported.append(metrics_data)
            return MetricExportResult.SUCCESS

        def force_flush(self, timeout_millis: float = 0) -> bool:
            return True

        def shutdown(self, timeout_millis: float = 0, **_: Any) -> None:
            pass

    registry = CollectorRegistry(auto_describe=True)
    exporter = Exporter()
    push = PeriodicExportingMetricReader(exporter, export_interval_millis=math.inf)
    provider, store = _provider(PrometheusMetricReader(registry=registry), push)
    assert store is not None
    late = InMemoryMetricReader()
    provider.add_metric_reader(late)  # added after attach: still gets them
    with store.lock:  # creating an instrument while recording does not deadlock
        store.counter("tracepass_x", "x", ("a",)).add(1, ("1",))
    assert (
        'tracepass_x_total{a="1",otel_scope_name="tracepass.collector"'
        in generate_latest(registry).decode()
    )
    push.collect()
    assert ("tracepass.collector", "tracepass_x") in points(exporter.exported[-1])
    assert ("tracepass.collector", "tracepass_x") in points(late.get_metrics_data())
    provider.shutdown()


def test_unsupported_setups_fall_back_to_the_sdk() -> None:
    provider, store = _provider(InMemoryMetricReader(), views=[View(instrument_name="x")])
    assert store is None
    provider.shutdown()
    provider, store = _provider(InMemoryMetricReader(), exemplar_filter=AlwaysOnExemplarFilter())
    assert store is None
    provider.shutdown()
    exp = InMemoryMetricReader(
        preferred_aggregation={Histogram: ExponentialBucketHistogramAggregation()}
    )
    provider, store = _provider(exp)
    assert store is None
    provider.shutdown()
    own = InMemoryMetricReader(
        preferred_aggregation={Histogram: ExplicitBucketHistogramAggregation((1.0, 2.0))}
    )
    provider, store = _provider(own)
    assert store is None
    em = EvaluationMetrics(provider.get_meter("m"), MetricsConfig(prometheus_enabled=False))
    assert em.hot is None
    provider.shutdown()
    assert attach(otel_metrics.NoOpMeter("noop")) is None


def test_cardinality_limit_overflows_like_the_sdk() -> None:
    got = []
    for light in (True, False):
        reader = InMemoryMetricReader(cardinality_limits={Counter: 3, Histogram: 2})
        provider = MeterProvider(metric_readers=[reader])
        meter = provider.get_meter("t")
        store = attach(meter) if light else None
        for i in range(6):
            if store:
                counter = store.counter("c", "d", ("k",))
                histogram = store.histogram("h", "d", ("k",), SCORE_BUCKETS)
                with store.lock:
                    counter.add(i + 1, (str(i),))
                    histogram.record(i / 10, (str(i),))
            else:
                meter.create_counter("c", description="d").add(i + 1, {"k": str(i)})
                meter.create_histogram(
                    "h", description="d", explicit_bucket_boundaries_advisory=SCORE_BUCKETS
                ).record(i / 10, {"k": str(i)})
        got.append(points(reader.get_metrics_data()))
        provider.shutdown()
    assert got[0] == got[1]
    assert got[0][("t", "c")][5][-1][0] == (("otel.metric.overflow", True),)
    assert got[0][("t", "h")][5][-1][0] == (("otel.metric.overflow", True),)


def test_recording_while_readers_collect_loses_nothing() -> None:
    """Records on one thread (the event loop's role), collections on others (the
    Prometheus and OTLP threads): the cumulative total and the sum of the deltas are
    every measurement."""
    cumulative, delta = InMemoryMetricReader(), InMemoryMetricReader(preferred_temporality=DELTA)
    provider, store = _provider(cumulative, delta)
    assert store is not None
    counter = store.counter("c", "d", ("k",))
    histogram = store.histogram("h", "d", ("k",), SCORE_BUCKETS)
    deltas: list[MetricsData | None] = []
    done = threading.Event()

    def collect() -> None:
        while not done.is_set():
            deltas.append(delta.get_metrics_data())
            cumulative.get_metrics_data()

    thread = threading.Thread(target=collect)
    thread.start()
    for i in range(20_000):
        with store.lock:
            counter.add(1, (str(i % 3),))
            histogram.record(0.5, ("x",))
    done.set()
    thread.join()
    deltas.append(delta.get_metrics_data())
    total = points(cumulative.get_metrics_data())
    assert sum(row[1] for row in total[("tracepass.collector", "c")][5]) == 20_000
    assert total[("tracepass.collector", "h")][5][0][1] == 20_000
    summed = sum(
        row[1]
        for data in deltas
        for (_, name), metric in points(data).items()
        if name == "c"
        for row in metric[5]
    )
    assert summed == 20_000
    provider.shutdown()


def test_the_otlp_exporters_environment_preferences_are_followed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE=delta: the push reader gets
    deltas; an exponential default histogram aggregation: the SDK instruments record."""
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "delta")
    push = PeriodicExportingMetricReader(
        OTLPMetricExporter(endpoint="http://127.0.0.1:9/v1/metrics"),
        export_interval_millis=math.inf,
    )
    provider, store = _provider(push)
    assert store is not None
    counter = store.counter("c", "d", ("k",))
    with store.lock:
        counter.add(1, ("a",))
    (metric,) = store.collect(push)
    assert metric.data.aggregation_temporality is AggregationTemporality.DELTA  # type: ignore[union-attr]
    assert store.collect(push) == []  # nothing new in the next interval
    provider.shutdown(timeout_millis=100)

    monkeypatch.setenv(
        "OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION",
        "base2_exponential_bucket_histogram",
    )
    push = PeriodicExportingMetricReader(
        OTLPMetricExporter(endpoint="http://127.0.0.1:9/v1/metrics"),
        export_interval_millis=math.inf,
    )
    provider, store = _provider(push)
    assert store is None
    provider.shutdown(timeout_millis=100)


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_serve_with_otlp_push_uses_the_light_path(protocol: str) -> None:
    config = MetricsConfig(
        prometheus_enabled=False,
        otlp_endpoint="http://127.0.0.1:9",
        otlp_protocol=protocol,  # type: ignore[arg-type]
        export_interval_s=3600,
        otlp_timeout_s=0.2,
    )
    tel = build_telemetry(config)
    try:
        assert EvaluationMetrics(tel.meter(), config).hot is not None
    finally:
        tel.shutdown()
