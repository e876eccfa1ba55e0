"""EvaluationMetrics through a real MeterProvider, the real Prometheus exporter on an
ephemeral port (scraped over HTTP) and a real in-memory OTel log pipeline."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator

import pytest
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from prometheus_client.parser import text_string_to_metric_families

from tracepass.collector.config import MetricsConfig, WindowConfig
from tracepass.collector.export.metrics import EVENT_NAME, EvaluationMetrics
from tracepass.collector.export.telemetry import Telemetry, build_telemetry
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
)
from tracepass.evaluator.stats.passk import estimate
from tracepass.evaluator.stats.rolling import RollingAggregator

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
IDENT = {"agent_name": "bot", "agent_version": "1.0", "reference_set": "refs"}


class Clock:
    def __init__(self, t: float = 1_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def make_result(
    cid: str,
    outcome: Outcome,
    *,
    agent: str = "bot",
    version: str = "1.0",
    reference: str = "r1",
) -> ConversationResult:
    ok = outcome is Outcome.PASS
    turn = TurnResult(
        index=0,
        query="2+2?",
        answer="4" if ok else "5",
        answer_score=1.0 if ok else 0.0,
        answer_correct=ok,
        graders=(GraderResult(grader="exact", score=1.0 if ok else 0.0, passed=ok, reasoning="r"),),
        tool_correctness=ToolCorrectness(
            selection=1.0,
            parameters=0.5,
            sequence=1.0,
            utilization=1.0,
            overall=0.875,
            correct=False,
        ),
        trajectory=TrajectoryScores(
            exact=ok, in_order=ok, any_order=ok, precision=1.0, recall=0.5, f1=2 / 3
        ),
        tool_calls=(ToolCall(name="calc", arguments={"a": 2}), ToolCall(name="calc")),
        correct=ok,
    )
    return ConversationResult(
        conversation_id=cid,
        reference_id=reference,
        reference_set="refs",
        agent_name=agent,
        agent_version=version,
        correct=ok,
        outcome=outcome,
        turns=(turn,),
    )


@pytest.fixture
def logs() -> InMemoryLogRecordExporter:
    return InMemoryLogRecordExporter()


def setup(
    logs: InMemoryLogRecordExporter, **cfg: object
) -> tuple[Telemetry, EvaluationMetrics, Clock]:
    config = MetricsConfig(prometheus_host="127.0.0.1", prometheus_port=0, **cfg)  # type: ignore[arg-type]
    tel = build_telemetry(config, log_processors=[SimpleLogRecordProcessor(logs)])
    clock = Clock()
    em = EvaluationMetrics(tel.meter(), config, event_logger=tel.event_logger(), clock=clock)
    return tel, em, clock


@pytest.fixture
def stack(logs: InMemoryLogRecordExporter) -> Iterator[tuple[Telemetry, EvaluationMetrics, Clock]]:
    tel, em, clock = setup(logs)
    yield tel, em, clock
    tel.shutdown()


def scrape(tel: Telemetry) -> Samples:
    assert tel.prometheus_url is not None
    with urllib.request.urlopen(tel.prometheus_url, timeout=10) as resp:
        text = resp.read().decode()
    out: Samples = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            labels = {k: v for k, v in s.labels.items() if not k.startswith("otel_scope")}
            out[(s.name, frozenset(labels.items()))] = s.value
    return out


def get(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset({**IDENT, **labels}.items())))


def names(samples: Samples) -> set[str]:
    return {n for n, _ in samples}


def test_counters_histograms_and_gauges(stack: tuple[Telemetry, EvaluationMetrics, Clock]) -> None:
    tel, em, clock = stack
    assert tel.prometheus_port
    assert tel.prometheus_port > 0
    for i in range(25):
        em.record(
            make_result(f"c{i}", Outcome.PASS if i % 5 else Outcome.FAIL),
            now=clock.t + i,
            lag_s=2.5,
        )
    em.record(make_result("e", Outcome.ERROR), now=clock.t + 30)
    em.record_judge_call("ok")
    clock.t += 31
    s = scrape(tel)
    assert get(s, "tracepass_conversations_total", outcome="pass") == 20
    assert get(s, "tracepass_conversations_total", outcome="fail") == 5
    assert get(s, "tracepass_conversations_total", outcome="error") == 1
    assert get(s, "tracepass_turns_total", outcome="pass") == 20
    assert get(s, "tracepass_tool_calls_total") == 52
    assert s[("tracepass_judge_calls_total", frozenset({("outcome", "ok")}))] == 1
    assert get(s, "tracepass_evaluation_lag_seconds_count") == 25
    assert get(s, "tracepass_tool_correctness_count", dimension="parameters") == 26
    assert get(s, "tracepass_tool_correctness_bucket", dimension="parameters", le="0.5") == 26
    assert get(s, "tracepass_trajectory_recall_sum") == pytest.approx(13.0)
    # Error outcomes are not evidence about the agent: n = 25, c = 20.
    assert get(s, "tracepass_window_conversations", window="1h") == 25
    assert get(s, "tracepass_window_successes", window="24h") == 20
    ref = estimate(25, 20, 3)
    w = {"window": "1h", "k": "3"}
    assert get(s, "tracepass_pass_pow_k", estimator="plugin", **w) == pytest.approx(0.8**3)
    assert get(s, "tracepass_pass_pow_k", estimator="bayes", **w) == pytest.approx(
        ref.pass_pow_k.mean
    )
    assert get(s, "tracepass_pass_pow_k", estimator="unbiased", **w) == pytest.approx(
        ref.pass_pow_k.unbiased
    )
    assert get(s, "tracepass_pass_pow_k_lower", estimator="bayes", **w) == pytest.approx(
        ref.pass_pow_k.lower
    )
    assert get(s, "tracepass_pass_at_k_upper", estimator="bayes", **w) == pytest.approx(
        ref.pass_at_k.upper
    )
    assert get(s, "tracepass_pass_at_k", estimator="plugin", window="fast", k="1") is not None
    assert get(s, "tracepass_cusum") is not None
    # The readiness rule on pass^3's interval [0.22, 0.75]: it holds the 0.7 target.
    assert get(s, "tracepass_readiness", window="1h", tier="inconclusive") == 1
    assert get(s, "tracepass_readiness", window="1h", tier="needs_improvement") is None


def test_readiness_gauge_follows_headline_k_and_target(logs: InMemoryLogRecordExporter) -> None:
    """tracepass_readiness is the readiness rule at metrics.headline_k against
    metrics.pass_pow_k_target, on the window's credible interval."""
    tel, em, clock = setup(logs, headline_k=1, pass_pow_k_target=0.6)
    try:
        for i in range(40):
            em.record(make_result(f"c{i}", Outcome.PASS if i % 10 else Outcome.FAIL), now=clock.t)
        clock.t += 1
        s = scrape(tel)
        lower = get(s, "tracepass_pass_pow_k_lower", estimator="bayes", window="1h", k="1")
        assert lower is not None
        assert lower > 0.6  # 36 of 40: pass@1 = pass^1 ≈ 0.9
        assert get(s, "tracepass_readiness", window="1h", tier="production_ready") == 1
    finally:
        tel.shutdown()


def test_min_sample_guard_exports_no_estimate(
    stack: tuple[Telemetry, EvaluationMetrics, Clock],
) -> None:
    tel, em, clock = stack
    for i in range(5):
        em.record(make_result(f"c{i}", Outcome.FAIL), now=clock.t)
    s = scrape(tel)
    assert get(s, "tracepass_window_conversations", window="1h") == 5
    for name in ("tracepass_pass_pow_k", "tracepass_pass_at_k", "tracepass_pass_pow_k_lower"):
        assert name not in names(s)
    assert "tracepass_readiness" not in names(s)


def test_label_cardinality_collapses_to_other(logs: InMemoryLogRecordExporter) -> None:
    tel, em, clock = setup(logs, label_limit=2)
    try:
        for i in range(5):
            em.record(make_result(f"c{i}", Outcome.PASS, agent=f"agent{i}"), now=clock.t)
        s = scrape(tel)
        agents = {dict(lbl)["agent_name"] for n, lbl in s if n == "tracepass_conversations_total"}
        assert agents == {"agent0", "agent1", "other"}
        # The limit of 2 also bounds label sets: a third set folds into all-`other`.
        other = {label: "other" for label in IDENT} | {"outcome": "pass"}
        assert s[("tracepass_conversations_total", frozenset(other.items()))] == 3
        assert s[("tracepass_label_overflow_total", frozenset({("label", "agent_name")}))] == 3
        assert s[("tracepass_label_overflow_total", frozenset({("label", "combination")}))] == 3
        assert len(em.aggregator.keys()) == 3
    finally:
        tel.shutdown()


def test_revisions_supersede(stack: tuple[Telemetry, EvaluationMetrics, Clock]) -> None:
    tel, em, clock = stack
    assert em.record(make_result("c", Outcome.FAIL), now=clock.t, revision=0)
    assert em.record(make_result("c", Outcome.PASS), now=clock.t + 1, revision=1)
    assert not em.record(make_result("c", Outcome.FAIL), now=clock.t + 2, revision=1)
    clock.t += 2
    s = scrape(tel)
    assert get(s, "tracepass_conversations_total", outcome="fail") == 1
    assert get(s, "tracepass_conversations_total", outcome="pass") == 1
    assert get(s, "tracepass_conversations_superseded_total", outcome="fail") == 1
    assert get(s, "tracepass_turns_superseded_total", outcome="fail") == 1
    assert get(s, "tracepass_window_conversations", window="1h") == 1
    assert get(s, "tracepass_window_successes", window="1h") == 1
    # The memory the windows hold: both revisions' index rows (the first one
    # superseded) and one bucket cell (the revised-away outcome left it).
    assert s[("tracepass_window_entries", frozenset())] == 3
    ign = ("tracepass_evaluations_ignored_total", frozenset({("reason", "stale_revision")}))
    assert s[ign] == 1


def test_restart_keeps_windows_and_revision_bookkeeping(logs: InMemoryLogRecordExporter) -> None:
    tel, em, clock = setup(logs)
    em.record(make_result("c", Outcome.FAIL), now=clock.t)
    state = em.aggregator.to_state()
    tel.shutdown()
    config = MetricsConfig(prometheus_host="127.0.0.1", prometheus_port=0)
    tel2 = build_telemetry(config)
    try:
        em2 = EvaluationMetrics(
            tel2.meter(), config, RollingAggregator.from_state(state), clock=clock
        )
        em2.record(make_result("c", Outcome.PASS), now=clock.t + 1, revision=1)
        s = scrape(tel2)
        assert get(s, "tracepass_conversations_superseded_total", outcome="fail") == 1
        assert get(s, "tracepass_window_successes", window="24h") == 1
        assert get(s, "tracepass_window_conversations", window="24h") == 1
    finally:
        tel2.shutdown()


def test_evaluation_events(
    stack: tuple[Telemetry, EvaluationMetrics, Clock], logs: InMemoryLogRecordExporter
) -> None:
    _, em, clock = stack
    trace_id, span_id = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
    conv = Conversation(id="c1", turns=(Turn(query="q", trace_id=trace_id, span_id=span_id),))
    em.record(make_result("c1", Outcome.PASS), now=clock.t, revision=0, conversation=conv)
    records = [r.log_record for r in logs.get_finished_logs()]
    assert {r.event_name for r in records} == {EVENT_NAME}
    by_name = {r.attributes["gen_ai.evaluation.name"]: r for r in records}  # type: ignore[index]
    assert set(by_name) == {
        "answer_correctness",
        "tool_correctness",
        "trajectory_f1",
        "turn_correctness",
        "conversation_correctness",
    }
    ans = by_name["answer_correctness"]
    assert ans.attributes is not None
    assert ans.attributes["gen_ai.evaluation.score.value"] == 1.0
    assert ans.attributes["gen_ai.evaluation.score.label"] == "pass"
    assert ans.attributes["gen_ai.evaluation.explanation"] == "r"
    assert ans.attributes["gen_ai.conversation.id"] == "c1"
    assert ans.attributes["gen_ai.agent.name"] == "bot"
    assert ans.trace_id == int(trace_id, 16)
    assert ans.span_id == int(span_id, 16)
    tool = by_name["tool_correctness"].attributes
    assert tool is not None
    assert tool["gen_ai.evaluation.score.value"] == 0.875
    assert tool["gen_ai.evaluation.score.label"] == "fail"


def test_events_can_be_turned_off(logs: InMemoryLogRecordExporter) -> None:
    tel, em, clock = setup(logs, emit_evaluation_events=False)
    try:
        assert tel.logger_provider is None
        em.record(make_result("c1", Outcome.PASS), now=clock.t)
        assert logs.get_finished_logs() == ()
    finally:
        tel.shutdown()


def test_custom_windows_and_ks(logs: InMemoryLogRecordExporter) -> None:
    tel, em, clock = setup(
        logs,
        windows=[WindowConfig(name="5m", seconds=300)],
        ks=[2],
        min_conversations=1,
    )
    try:
        em.record(make_result("a", Outcome.PASS), now=clock.t)
        em.record(make_result("b", Outcome.PASS), now=clock.t)
        s = scrape(tel)
        assert get(s, "tracepass_pass_pow_k", estimator="unbiased", window="5m", k="2") == 1.0
        assert get(s, "tracepass_pass_pow_k", estimator="plugin", window="1h", k="2") is None
        clock.t += 301
        s = scrape(tel)
        assert get(s, "tracepass_window_conversations", window="5m") == 0
        assert get(s, "tracepass_pass_pow_k", estimator="plugin", window="5m", k="2") is None
    finally:
        tel.shutdown()


def test_snapshot_reflects_new_results_and_is_shared_within_a_collection(
    stack: tuple[Telemetry, EvaluationMetrics, Clock],
) -> None:
    tel, em, clock = stack
    em.record(make_result("a", Outcome.PASS), now=clock.t)
    assert em.snapshot()[0].windows[0].n == 1
    em.record(make_result("b", Outcome.FAIL), now=clock.t)
    first = em.snapshot()
    assert first[0].windows[0].n == 2
    assert em.snapshot() is first  # nothing new: cached
    em.record(make_result("c", Outcome.FAIL), now=clock.t)
    # A callback inside a collection keeps the state the collection started with ...
    assert em.snapshot(in_collection=True) is first
    # ... and the next collection's first callback refreshes it.
    assert em.snapshot(refresh=True)[0].windows[0].n == 3
    s = scrape(tel)
    assert get(s, "tracepass_window_conversations", window="1h") == 3
