"""Policy-scored conversations as trials, and violations as a counter. Real Evaluator,
real MeterProvider and Prometheus exporter scraped over HTTP."""

from __future__ import annotations

from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter
from test_metrics import get, scrape, setup

from tracepass.collector.export.metrics import task_of
from tracepass.collector.export.outcomes import result_success
from tracepass.evaluator.models import Conversation, Outcome, Policy, ToolCall, ToolDefinition, Turn
from tracepass.evaluator.scoring.evaluator import Evaluator

POLICY = Policy.model_validate(
    {
        "id": "travel",
        "agent": "bot",
        "rules": [{"type": "order", "first": "search", "then": "book"}],
    }
)
OFFERED = (ToolDefinition(name="search"), ToolDefinition(name="book"))
LABELS = {"agent_name": "bot", "agent_version": "1.0"}


def conv(cid: str, *names: str) -> Conversation:
    calls = tuple(ToolCall(name=n) for n in names)
    return Conversation(
        id=cid,
        agent_name="bot",
        agent_version="1.0",
        turns=(Turn(query="q", answer="a", tool_calls=calls, offered_tools=OFFERED),),
    )


def test_policy_results_are_trials_with_their_own_series() -> None:
    ev = Evaluator()
    tel, em, clock = setup(InMemoryLogRecordExporter(), min_conversations=1)
    try:
        results = [
            ev.evaluate(conv(f"ok{i}", "search", "book"), None, policy=POLICY) for i in range(8)
        ]
        results += [ev.evaluate(conv("early", "book", "search"), None, policy=POLICY)]
        results += [ev.evaluate(conv("rogue", "search", "drop_db"), None, policy=POLICY)]
        # no policy for this agent: unscored, but its learned-check violation is counted
        stranger = conv("x", "drop_db").model_copy(update={"agent_name": "other"})
        unscored = ev.evaluate(stranger, None)
        assert unscored.outcome is Outcome.UNSCORED
        assert result_success(unscored) is None
        assert [r.outcome for r in results[-2:]] == [Outcome.FAIL, Outcome.FAIL]
        assert {task_of(r) for r in results} == {"policy:travel"}
        for r in [*results, unscored]:
            em.record(r, now=clock.t)
        s = scrape(tel)
        pol = {**LABELS, "reference_set": "policy:travel"}
        assert get(s, "tracepass_conversations_total", outcome="pass", **pol) == 8
        assert get(s, "tracepass_conversations_total", outcome="fail", **pol) == 2
        assert get(s, "tracepass_window_conversations", window="1h", **pol) == 10
        assert get(s, "tracepass_window_successes", window="1h", **pol) == 8
        assert get(s, "tracepass_pass_pow_k", window="1h", k="1", estimator="plugin", **pol) == 0.8
        assert get(s, "tracepass_policy_violations_total", rule="order", **pol) == 1
        assert get(s, "tracepass_policy_violations_total", rule="unknown_tool", **pol) == 1
        other = {"agent_name": "other", "agent_version": "1.0", "reference_set": "unknown"}
        assert get(s, "tracepass_policy_violations_total", rule="unknown_tool", **other) == 1
        assert get(s, "tracepass_conversations_total", outcome="unscored", **other) == 1
    finally:
        tel.shutdown()


def test_a_revision_supersedes_its_violations() -> None:
    ev = Evaluator()
    tel, em, clock = setup(InMemoryLogRecordExporter(), min_conversations=1)
    try:
        em.record(ev.evaluate(conv("c", "book"), None, policy=POLICY), now=clock.t)
        fixed = ev.evaluate(conv("c", "search", "book"), None, policy=POLICY)
        em.record(fixed, now=clock.t, revision=1)
        s = scrape(tel)
        pol = {**LABELS, "reference_set": "policy:travel"}
        assert get(s, "tracepass_policy_violations_total", rule="order", **pol) == 1
        assert get(s, "tracepass_policy_violations_superseded_total", rule="order", **pol) == 1
        assert get(s, "tracepass_window_successes", window="1h", **pol) == 1
    finally:
        tel.shutdown()
