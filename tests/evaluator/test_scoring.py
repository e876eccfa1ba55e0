"""The scoring entry point: turn/conversation correctness and outcomes."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from pydantic import ValidationError

from tracepass.evaluator.graders import GradeInput, Grader, GraderOptions, Verdict, register_grader
from tracepass.evaluator.models import (
    Conversation,
    ConversationResult,
    ExpectedTool,
    GraderSpec,
    Outcome,
    Reference,
    ReferenceTurn,
    ToolCall,
    Turn,
)
from tracepass.evaluator.scoring.evaluator import EvaluationConfig, Evaluator, ToolWeights


def crash(expected: dict[str, object], actual: dict[str, object]) -> float:
    raise RuntimeError("matcher bug")


REF = Reference(
    id="order",
    turns=(
        ReferenceTurn(
            query="Where is A-1?",
            expected_answer="shipped",
            expected_tools=(ExpectedTool(name="lookup", arguments={"id": "A-1"}),),
        ),
        ReferenceTurn(query="When?", expected_answer="Tuesday", expected_tools=()),
    ),
)


def conv(*turns: Turn, complete: bool = True) -> Conversation:
    return Conversation(
        id="c1",
        agent_name="bot",
        agent_version="1",
        turns=turns,
        reference_id="order",
        complete=complete,
    )


GOOD1 = Turn(
    query="Where is A-1?",
    answer="It has shipped.",
    tool_calls=(ToolCall(name="lookup", arguments={"id": "A-1"}, result={"status": "shipped"}),),
)
GOOD2 = Turn(query="When?", answer="Arrives Tuesday.")


def test_pass() -> None:
    r = Evaluator().evaluate(conv(GOOD1, GOOD2), REF, reference_set="support")
    assert r.outcome is Outcome.PASS
    assert r.correct
    assert (r.reference_set, r.agent_name, r.agent_version) == ("support", "bot", "1")
    t0, t1 = r.turns
    assert t0.answer_score == 1.0
    assert t0.tool_correctness is not None
    assert t0.tool_correctness.correct
    assert t0.tool_correctness.utilization == 1.0  # "shipped" detected in the answer
    assert t1.tool_correctness is None
    assert t1.trajectory is not None
    assert t1.trajectory.exact
    assert r.trajectory is not None
    assert r.trajectory.exact
    # results built with model_construct are valid models and serialize
    assert ConversationResult.model_validate_json(r.model_dump_json()) == r


def test_wrong_tool_arguments_fail_the_turn_even_with_a_right_answer() -> None:
    bad = GOOD1.model_copy(
        update={"tool_calls": (ToolCall(name="lookup", arguments={"id": "B-2"}, result="shipped"),)}
    )
    r = Evaluator().evaluate(conv(bad, GOOD2), REF)
    assert r.outcome is Outcome.FAIL
    t0 = r.turns[0]
    assert t0.answer_correct is True
    assert t0.correct is False
    assert t0.tool_correctness is not None
    assert t0.tool_correctness.parameters == 0.0
    # a lenient tool threshold lets it pass
    lenient = Evaluator(EvaluationConfig(tool_threshold=0.75)).evaluate(conv(bad, GOOD2), REF)
    assert lenient.outcome is Outcome.PASS


def test_calling_tools_when_none_expected_fails() -> None:
    extra = GOOD2.model_copy(update={"tool_calls": (ToolCall(name="lookup"),)})
    r = Evaluator().evaluate(conv(GOOD1, extra), REF)
    assert r.turns[1].tool_correctness is not None
    assert r.turns[1].tool_correctness.overall == 0.0
    assert r.outcome is Outcome.FAIL


def test_wrong_answer() -> None:
    r = Evaluator().evaluate(conv(GOOD1, GOOD2.model_copy(update={"answer": "Friday"})), REF)
    assert r.outcome is Outcome.FAIL
    assert r.turns[1].answer_score == 0.0
    assert r.turns[1].correct is False


def test_incomplete() -> None:
    r = Evaluator().evaluate(conv(GOOD1), REF)
    assert r.outcome is Outcome.INCOMPLETE
    assert not r.correct
    assert r.trajectory is not None
    assert r.trajectory.recall == 1.0
    r = Evaluator().evaluate(conv(GOOD1, GOOD2, complete=False), REF)
    assert r.outcome is Outcome.INCOMPLETE


def test_extra_turns_fail() -> None:
    r = Evaluator().evaluate(conv(GOOD1, GOOD2, GOOD2), REF)
    assert r.outcome is Outcome.FAIL
    assert r.turns[2].correct is None
    assert r.turns[2].answer_score is None


def test_grader_error_is_an_error_outcome_not_a_zero() -> None:
    ref = REF.model_copy(
        update={
            "turns": (
                REF.turns[0],
                REF.turns[1].model_copy(update={"graders": (GraderSpec(type="no-such-grader"),)}),
            )
        }
    )
    r = Evaluator().evaluate(conv(GOOD1, GOOD2), ref)
    assert r.outcome is Outcome.ERROR
    assert not r.correct
    t1 = r.turns[1]
    assert t1.answer_score is None
    assert t1.answer_error
    assert t1.correct is None


def test_matcher_error_is_an_error_outcome() -> None:
    ref = REF.model_copy(
        update={
            "turns": (
                REF.turns[0].model_copy(
                    update={
                        "expected_tools": (
                            ExpectedTool(
                                name="lookup", arguments={}, argument_match=f"{__name__}:crash"
                            ),
                        )
                    }
                ),
                REF.turns[1],
            )
        }
    )
    r = Evaluator().evaluate(conv(GOOD1, GOOD2), ref)
    assert r.outcome is Outcome.ERROR
    assert r.turns[0].tool_error is not None
    assert "matcher bug" in r.turns[0].tool_error


def test_reference_free() -> None:
    r = Evaluator().evaluate(conv(GOOD1, GOOD2), None)
    assert r.outcome is Outcome.UNSCORED
    assert not r.correct
    assert r.reference_id is None
    assert all(
        t.answer_score is None and t.tool_correctness is None and t.correct is None for t in r.turns
    )
    assert Evaluator().evaluate(conv(GOOD1, complete=False), None).outcome is Outcome.INCOMPLETE


def test_ungraded_turn_counts_as_answer_ok() -> None:
    ref = Reference(
        id="x", turns=(ReferenceTurn(query="q", expected_tools=(ExpectedTool(name="lookup"),)),)
    )
    r = Evaluator().evaluate(conv(GOOD1), ref)
    assert r.turns[0].answer_score is None
    assert r.turns[0].correct is True
    assert r.outcome is Outcome.PASS


def test_trajectory_match_by_arguments() -> None:
    bad = GOOD1.model_copy(
        update={"tool_calls": (ToolCall(name="lookup", arguments={"id": "B-2"}),)}
    )
    by_name = Evaluator().evaluate(conv(bad, GOOD2), REF)
    by_args = Evaluator(EvaluationConfig(trajectory_match="name_and_arguments")).evaluate(
        conv(bad, GOOD2), REF
    )
    assert by_name.turns[0].trajectory is not None
    assert by_name.turns[0].trajectory.exact
    assert by_args.turns[0].trajectory is not None
    assert not by_args.turns[0].trajectory.exact


async def test_async_matches_sync() -> None:
    ev = Evaluator()
    a = await ev.aevaluate(conv(GOOD1, GOOD2), REF)
    with pytest.raises(RuntimeError, match="aevaluate"):
        Evaluator(EvaluationConfig(default_grader="llm")).evaluate(conv(GOOD1, GOOD2), REF)
    assert a.outcome is Outcome.PASS


def test_sync_with_loop_grader_uses_asyncio_run() -> None:
    # an llm grader without a judge is an error result; it still needs the loop path
    r = Evaluator(EvaluationConfig(default_grader="llm")).evaluate(conv(GOOD1, GOOD2), REF)
    assert r.outcome is Outcome.ERROR


def test_config_validation() -> None:
    with pytest.raises(ValidationError, match="not all be zero"):
        ToolWeights(selection=0, parameters=0, sequence=0, utilization=0)
    with pytest.raises(ValidationError):
        ToolWeights(selection=-1)
    with pytest.raises(ValidationError):
        EvaluationConfig(threshold=1.5)
    assert ToolWeights(selection=2, parameters=2, sequence=0, utilization=0).normalized() == (
        0.5,
        0.5,
        0.0,
        0.0,
    )


class _BrokenPromise(Grader[GraderOptions]):
    """Says it never awaits, then does: scoring must fall back to an event loop."""

    type_name = "test_scoring_broken_promise"
    options_model = GraderOptions
    needs_loop = False
    calls = 0

    async def grade(self, inp: GradeInput) -> Verdict:
        type(self).calls += 1
        await asyncio.sleep(0)
        return Verdict.ok(1.0, True, "slept")


register_grader(_BrokenPromise)


def _broken_ref() -> Reference:
    return Reference(
        id="broken",
        turns=(
            ReferenceTurn(
                query="Where is A-1?",
                graders=(GraderSpec(type="test_scoring_broken_promise"),),
                expected_tools=(ExpectedTool(name="lookup", arguments={"id": "A-1"}),),
            ),
            ReferenceTurn(query="When?", expected_answer="Tuesday", expected_tools=()),
        ),
    )


def test_grader_that_awaits_despite_needs_loop_false_falls_back_to_a_loop() -> None:
    r = Evaluator().evaluate(conv(GOOD1, GOOD2), _broken_ref())
    assert r.outcome is Outcome.PASS
    assert r.turns[0].graders[0].reasoning == "slept"


async def test_grader_that_awaits_inside_aevaluate() -> None:
    r = await Evaluator().aevaluate(conv(GOOD1, GOOD2), _broken_ref())
    assert r.outcome is Outcome.PASS
    assert r.turns[0].graders[0].reasoning == "slept"


def test_sync_and_awaited_paths_give_identical_results(monkeypatch: pytest.MonkeyPatch) -> None:
    """The loop-free path (plain calls) and the awaited path (forced here, as if some
    grader needed a loop) must agree field for field, including on errors, missing
    answers, extra and missing turns."""
    ref = Reference(
        id="mixed",
        turns=(
            *REF.turns,
            ReferenceTurn(
                query="Q3",
                expected_answer="a; b",
                graders=(
                    GraderSpec(type="contains", split_expected=True, mode="any"),
                    GraderSpec(type="exact", weight=2.0),
                ),
                expected_tools=(ExpectedTool(name="x", argument_match="no.such:matcher"),),
            ),
            ReferenceTurn(query="Q4", graders=(GraderSpec(type="contains", mode="most"),)),
        ),
    )
    bad = ToolCall(name="x", arguments={"k": 1})
    convs = [
        conv(GOOD1, GOOD2),
        conv(GOOD1),
        conv(GOOD1, Turn(query="When?", answer=None), Turn(query="Q3", answer="b")),
        conv(
            Turn(query="x", answer="shipped", tool_calls=(ToolCall(name="lookup"),)),
            GOOD2,
            Turn(query="Q3", answer="a", tool_calls=(bad,)),
            Turn(query="Q4", answer="?"),
            Turn(query="Q5", answer="extra"),
        ),
    ]
    plain = [Evaluator().evaluate(c, ref) for c in convs]
    original = Evaluator._compile

    def needs_loop(self: Evaluator, reference: Reference) -> object:
        return dataclasses.replace(original(self, reference), needs_loop=True)

    monkeypatch.setattr(Evaluator, "_compile", needs_loop)
    awaited = [Evaluator().evaluate(c, ref) for c in convs]
    assert [r.model_dump() for r in plain] == [r.model_dump() for r in awaited]
    assert {r.outcome for r in plain} >= {Outcome.ERROR, Outcome.INCOMPLETE}


def test_single_tool_use_is_reported_for_configured_names() -> None:
    from tracepass.evaluator.models import (
        Conversation,
        ExpectedTool,
        Reference,
        ReferenceTurn,
        ToolCall,
        Turn,
    )
    from tracepass.evaluator.scoring.evaluator import EvaluationConfig, Evaluator

    ref = Reference(
        id="r",
        turns=(
            ReferenceTurn(query="q1", expected_tools=(ExpectedTool(name="search"),)),
            ReferenceTurn(query="q2", expected_tools=(ExpectedTool(name="book"),)),
        ),
    )
    conv = Conversation(
        id="c",
        turns=(
            Turn(query="q1", answer="a", tool_calls=(ToolCall(name="search"),)),
            Turn(query="q2", answer="b", tool_calls=(ToolCall(name="search"),)),
        ),
    )
    result = Evaluator(EvaluationConfig(single_tool_use=("search", "book"))).evaluate(conv, ref)
    assert result.turns[0].single_tool_use == {"search": True, "book": False}
    assert result.turns[1].single_tool_use == {"search": True, "book": False}
    assert result.single_tool_use == {"search": True, "book": False}
    plain = Evaluator().evaluate(conv, ref)
    assert plain.single_tool_use is None
    assert plain.turns[0].single_tool_use is None
