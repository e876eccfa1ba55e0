"""How EvaluationMetrics treats each outcome (incomplete, error, unscored, no reference),
the evaluation events of ungraded turns, and judge calls reported by a real LLMJudge.
Real MeterProvider, real Prometheus exporter scraped over HTTP, real OTel log pipeline."""

from __future__ import annotations

import asyncio

from langchain_core.language_models.fake_chat_models import FakeListChatModel
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter
from test_metrics import get, make_result, scrape, setup

from tracepass.collector.export.metrics import result_success, turn_outcome
from tracepass.evaluator.judge.llm_judge import LLMJudge
from tracepass.evaluator.models import ConversationResult, Outcome, TurnResult

UNKNOWN = {"reference_set": "unknown"}


def reference_free(cid: str, outcome: Outcome) -> ConversationResult:
    """What the evaluator returns for a conversation without a reference."""
    turn = TurnResult(
        index=0,
        query="q",
        answer="a",
        answer_score=None,
        answer_correct=None,
        tool_correctness=None,
        correct=None,
    )
    return ConversationResult(
        conversation_id=cid,
        reference_id=None,
        reference_set=None,
        agent_name="bot",
        agent_version="1.0",
        correct=False,
        outcome=outcome,
        turns=(turn,),
    )


def test_outcomes_as_trials() -> None:
    assert result_success(make_result("a", Outcome.PASS)) is True
    assert result_success(make_result("a", Outcome.FAIL)) is False
    assert result_success(make_result("a", Outcome.INCOMPLETE)) is False
    assert result_success(make_result("a", Outcome.ERROR)) is None
    assert result_success(reference_free("a", Outcome.UNSCORED)) is None
    # Evicted before it finished, so the evaluator says "incomplete"; still no reference.
    assert result_success(reference_free("a", Outcome.INCOMPLETE)) is None
    assert turn_outcome(reference_free("a", Outcome.UNSCORED).turns[0]) == "unscored"


def test_unscored_and_unmatched_are_counted_but_never_trials() -> None:
    logs = InMemoryLogRecordExporter()
    tel, em, clock = setup(logs, min_conversations=1)
    try:
        em.record(make_result("p", Outcome.PASS), now=clock.t)
        em.record(make_result("i", Outcome.INCOMPLETE), now=clock.t)  # matched: a failure
        for i in range(30):
            em.record(reference_free(f"u{i}", Outcome.UNSCORED), now=clock.t)
        em.record(reference_free("evicted", Outcome.INCOMPLETE), now=clock.t)
        s = scrape(tel)
        assert get(s, "tracepass_conversations_total", outcome="incomplete") == 1
        assert get(s, "tracepass_conversations_total", outcome="unscored", **UNKNOWN) == 30
        assert get(s, "tracepass_conversations_total", outcome="incomplete", **UNKNOWN) == 1
        assert get(s, "tracepass_turns_total", outcome="unscored", **UNKNOWN) == 31
        assert get(s, "tracepass_turns_total", outcome="incomplete", **UNKNOWN) is None
        # The matched key: n = 2 (pass + incomplete), c = 1.
        assert get(s, "tracepass_window_conversations", window="1h") == 2
        assert get(s, "tracepass_window_successes", window="1h") == 1
        # The unmatched key has a window but no trial in it, hence no estimate, no CUSUM.
        assert get(s, "tracepass_window_conversations", window="1h", **UNKNOWN) == 0
        estimates = [
            lbl
            for name, lbl in s
            if name.startswith(("tracepass_pass_", "tracepass_cusum", "tracepass_readiness"))
            and ("reference_set", "unknown") in lbl
        ]
        assert estimates == []
    finally:
        tel.shutdown()


def test_events_of_ungraded_turns_and_non_evidence_outcomes() -> None:
    logs = InMemoryLogRecordExporter()
    tel, em, clock = setup(logs)
    try:
        em.record(reference_free("u", Outcome.UNSCORED), now=clock.t)
        records = [r.log_record for r in logs.get_finished_logs()]
        by_name = {r.attributes["gen_ai.evaluation.name"]: r.attributes for r in records}  # type: ignore[index]
        # Nothing graded the answer: no answer_correctness event (never a fake "error").
        assert set(by_name) == {"turn_correctness", "conversation_correctness"}
        assert by_name["turn_correctness"]["gen_ai.evaluation.score.label"] == "unscored"  # type: ignore[index]
        conv = by_name["conversation_correctness"]
        assert conv is not None
        assert conv["gen_ai.evaluation.score.label"] == "unscored"
        assert "gen_ai.evaluation.score.value" not in conv  # no evidence, no 0
        logs.clear()
        em.record(make_result("e", Outcome.ERROR), now=clock.t)
        conv_events = [
            r.log_record.attributes
            for r in logs.get_finished_logs()
            if r.log_record.attributes is not None
            and r.log_record.attributes["gen_ai.evaluation.name"] == "conversation_correctness"
        ]
        assert len(conv_events) == 1
        assert conv_events[0] is not None
        assert conv_events[0]["gen_ai.evaluation.score.label"] == "error"
        assert "gen_ai.evaluation.score.value" not in conv_events[0]
    finally:
        tel.shutdown()


async def test_judge_calls_reported_by_a_real_judge() -> None:
    logs = InMemoryLogRecordExporter()
    tel, em, _ = setup(logs)
    try:
        good = FakeListChatModel(responses=['{"score": 0.9, "reasoning": "right"}'] * 2)
        judge = LLMJudge(good, on_call=em.record_judge_call, backoff_s=0.0)
        # Two identical requests in flight share one model call: ok + cached.
        v1, v2 = await asyncio.gather(
            judge.judge("capital of France?", "Paris", "Paris"),
            judge.judge("capital of France?", "Paris", "Paris"),
        )
        assert v1.score == v2.score == 0.9
        bad = FakeListChatModel(responses=["no idea", "still no idea"])
        failing = LLMJudge(bad, on_call=em.record_judge_call, backoff_s=0.0, max_retries=1)
        assert (await failing.judge("q", "a", "b")).error is not None
        s = scrape(tel)
        calls = {
            dict(lbl)["outcome"]: v
            for (name, lbl), v in s.items()
            if name == "tracepass_judge_calls_total"
        }
        assert calls == {"ok": 1, "cached": 1, "retry": 1, "error": 1}
    finally:
        tel.shutdown()
