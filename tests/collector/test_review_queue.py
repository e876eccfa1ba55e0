"""The review queue's parts: the rules (`failing`, `judge_uncertain`, `sampled` with a
deterministic rate, globs), the label tables on a real state file, and the live
agreement (the offline statistics, pooled per judge)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from tracepass.collector.config import ReviewConfig, ReviewRuleConfig
from tracepass.collector.pipeline.review_rules import ReviewRules
from tracepass.collector.state import StateStore
from tracepass.collector.state.review_labels import ReviewLabel, ReviewLabels
from tracepass.evaluator.judge import agreement
from tracepass.evaluator.models import ConversationResult, GraderResult, Outcome, TurnResult
from tracepass.evaluator.offline.human_review import labelled_rows, live_agreement
from tracepass.evaluator.stats.conversation_sampling import keep_conversation


def _result(
    cid: str,
    outcome: Outcome = Outcome.PASS,
    *,
    agent: str = "bot",
    judge: tuple[float | None, bool | None] | None = None,
) -> ConversationResult:
    graders: tuple[GraderResult, ...] = ()
    if judge is not None:
        graders = (GraderResult(grader="llm", score=judge[0], passed=judge[1]),)
    turn = TurnResult(
        index=0,
        query="q",
        answer="a",
        answer_score=None,
        answer_correct=None,
        graders=graders,
        tool_correctness=None,
        correct=outcome is Outcome.PASS,
    )
    return ConversationResult(
        conversation_id=cid,
        reference_id="r",
        agent_name=agent,
        agent_version="1.0",
        correct=outcome is Outcome.PASS,
        outcome=outcome,
        turns=(turn,),
    )


def _rules(*rules: ReviewRuleConfig) -> ReviewRules:
    return ReviewRules(ReviewConfig(rules=list(rules)), threshold=0.7)


def test_failing_rule_queues_only_failing_conversations() -> None:
    rules = _rules(ReviewRuleConfig(when="failing"))
    assert rules.reason(_result("a", Outcome.FAIL)) == "failing"
    assert rules.reason(_result("b", Outcome.ERROR)) == "failing"
    assert rules.reason(_result("c", Outcome.INCOMPLETE)) == "failing"
    assert rules.reason(_result("d", Outcome.PASS)) is None


def test_sampled_rate_is_the_sampling_contract_on_the_id() -> None:
    rules = _rules(ReviewRuleConfig(when="sampled", rate=0.3))
    ids = [f"conv-{i}" for i in range(2000)]
    picked = [c for c in ids if rules.reason(_result(c)) == "sampled"]
    assert picked == [c for c in ids if keep_conversation(c, 0.3, "review")]
    assert 0.25 < len(picked) / len(ids) < 0.35
    # Deterministic: the same ids again, the same decisions.
    assert picked == [c for c in ids if rules.reason(_result(c)) == "sampled"]


def test_first_matching_rule_that_keeps_wins_and_globs_filter() -> None:
    rules = _rules(
        ReviewRuleConfig(when="failing", agent_name="shop-*"),
        ReviewRuleConfig(when="sampled", rate=0.0),
    )
    assert rules.reason(_result("a", Outcome.FAIL, agent="shop-bot")) == "failing"
    assert rules.reason(_result("a", Outcome.FAIL, agent="travel")) is None


def test_judge_uncertain_near_the_threshold_or_without_a_verdict() -> None:
    rules = _rules(ReviewRuleConfig(when="judge_uncertain", margin=0.1))
    assert rules.reason(_result("a", judge=(0.75, True))) == "judge_uncertain"
    assert rules.reason(_result("b", judge=(None, None))) == "judge_uncertain"
    assert rules.reason(_result("c", judge=(1.0, True))) is None
    assert rules.reason(_result("d")) is None  # no judge at all


def test_new_failure_mode_needs_the_index() -> None:
    config = ReviewConfig(rules=[ReviewRuleConfig(when="new_failure_mode")])
    rules = ReviewRules(config, threshold=0.7, new_failure_mode=lambda r, complete: True)
    assert rules.reason(_result("a", Outcome.FAIL)) == "new_failure_mode"
    assert rules.reason(_result("b", Outcome.PASS)) is None
    assert ReviewRules(config, threshold=0.7).reason(_result("a", Outcome.FAIL)) is None


def test_label_tables_on_a_real_state_file(tmp_path: Path) -> None:
    async def run() -> None:
        store = StateStore(tmp_path / "state.sqlite")
        store.open()
        try:
            labels = ReviewLabels(store)
            await labels.open()
            assert await labels.enqueue("c1", "failing", 10.0)
            assert not await labels.enqueue("c1", "sampled", 11.0)  # first reason stays
            assert await labels.enqueue("c2", "sampled", 12.0)
            assert [i.conversation_id for i in labels.queue()] == ["c1", "c2"]
            await labels.put_label(ReviewLabel("c1", False, {0: False}, "no", None, 20.0))
            await labels.put_label(ReviewLabel("c3", True, {}, "", "ann", 21.0))  # unqueued
            assert [i.conversation_id for i in labels.queue()] == ["c2"]
            assert labels.counts() == (3, 2)
            await labels.put_label(ReviewLabel("c1", True, {0: True}, "yes", None, 22.0))
            assert labels.label("c1") == ReviewLabel("c1", True, {0: True}, "yes", None, 22.0)
            assert labels.queued("c3") is not None
            assert labels.queued("c3").reason == "manual"  # type: ignore[union-attr]
        finally:
            store.close()
        # Reopened: the labels are durable.
        store = StateStore(tmp_path / "state.sqlite")
        store.open()
        try:
            assert [x.conversation_id for x in ReviewLabels(store).labels()] == ["c3", "c1"]
        finally:
            store.close()

    asyncio.run(run())


pairs = st.lists(st.tuples(st.booleans(), st.booleans(), st.booleans()), max_size=40)


@settings(max_examples=60, deadline=None)
@given(pairs)
def test_live_kappa_is_the_offline_kappa_of_the_pooled_pairs(
    items: list[tuple[bool, bool, bool]],
) -> None:
    labelled = []
    for i, (judge, human_turn, human_conv) in enumerate(items):
        result = _result(f"c{i}", Outcome.PASS if judge else Outcome.FAIL, judge=(None, judge))
        labelled.append((result.model_dump(mode="json"), human_conv, {0: human_turn}))
    found = {(j["judge"], j["level"]): j for j in live_agreement(labelled)}
    if not items:
        assert found == {}
        return
    judges = [j for j, _, _ in items]
    turn = found[("llm", "turn")]
    assert turn["n"] == len(items)
    assert turn["kappa"] == agreement.cohens_kappa(judges, [h for _, h, _ in items])
    conv = found[("outcome", "conversation")]
    assert conv["kappa"] == agreement.cohens_kappa(judges, [h for _, _, h in items])


def test_labelled_rows_keep_the_export_columns() -> None:
    doc = _result("c1", judge=(0.9, True)).model_dump(mode="json")
    rows = labelled_rows(doc, {0: False})
    assert rows == [
        {
            "conversation_id": "c1",
            "reference_id": "r",
            "turn_index": 0,
            "query": "q",
            "answer": "a",
            "expected": None,
            "judge_score": 0.9,
            "judge_passed": True,
            "judge_reasoning": None,
            "human_label": "fail",
        }
    ]
    assert labelled_rows(doc, {})[0]["human_label"] == ""


def test_conversation_judges_count_against_the_conversation_label() -> None:
    from tracepass.evaluator.models import Judgement

    def judged(cid: str, passed: bool) -> dict[str, object]:
        result = _result(cid).model_copy(
            update={
                "judgements": (
                    Judgement(
                        name="tone",
                        outcome=Outcome.PASS if passed else Outcome.FAIL,
                        score=1.0 if passed else 0.0,
                        passed=passed,
                        rubric_version="1",
                    ),
                )
            }
        )
        return result.model_dump(mode="json")

    found = live_agreement([(judged("a", True), True, {}), (judged("b", True), False, {})])
    tone = next(j for j in found if j["judge"] == "judge:tone")
    assert tone["level"] == "conversation"
    assert tone["matrix"] == {"tp": 1, "fp": 1, "fn": 0, "tn": 0}
