"""The fair-forge profile: Fair Forge 3.0.0's published definitions, hand-computed on its
own sample dataset, plus the places where we follow the paper over the code."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracepass.evaluator.fairforge import fair_forge_parameter_credit, fair_forge_tool_correctness
from tracepass.evaluator.models import (
    ConversationResult,
    ExpectedTool,
    Reference,
    ReferenceTurn,
    ToolCall,
    Turn,
)
from tracepass.evaluator.references import load_dataset
from tracepass.evaluator.scoring import EvaluationConfig, Evaluator
from tracepass.evaluator.toolcorrectness import compile_turn, tool_correctness

SAMPLE = Path(__file__).parent.parent / "data" / "fair-forge" / "dataset_agentic.json"


def ff(calls: list[ToolCall], rt: ReferenceTurn, declared: bool | None = True, **kw: object):  # type: ignore[no-untyped-def]
    return fair_forge_tool_correctness(calls, rt, declared=declared, **kw)  # type: ignore[arg-type]


def rt(*tools: ExpectedTool | str, ordered: bool = True) -> ReferenceTurn:
    return ReferenceTurn(
        query="q",
        expected_tools=tuple(ExpectedTool(name=t) if isinstance(t, str) else t for t in tools),
        tool_sequence_matters=ordered,
    )


def test_sample_dataset_hand_computed() -> None:
    ds = load_dataset(SAMPLE)
    (ref,) = ds.reference_set.references
    # (selection, parameters, sequence, utilization, overall) per conversation and turn
    expected: dict[str, list[tuple[float, float, float, float, float]]] = {
        "agentic_eval_session": [(1, 1, 1, 1, 1.0)] * 3,
        "agentic_eval_session2": [(1, 1, 1, 1, 1.0)] * 3,
        # turn 2: units missing → keys {location, units}, 1 of 2 equal → 0.5; 0.25*3.5
        "agentic_eval_session3": [(1, 1, 1, 1, 1.0), (1, 0.5, 1, 1, 0.875), (1, 1, 1, 1, 1.0)],
    }
    for conv in ds.conversations:
        for turn, rturn, want in zip(conv.turns, ref.turns, expected[conv.id], strict=True):
            tc = ff(list(turn.tool_calls), rturn, turn.final_answer_uses_tools)
            assert tc is not None
            got = (tc.selection, tc.parameters, tc.sequence, tc.utilization, tc.overall)
            assert got == pytest.approx(want), (conv.id, rturn.query)
            assert tc.correct is (want[4] >= 1.0)


def test_sample_repeated_tool_follows_the_paper() -> None:
    """Turn 3 calls `calculator` twice. Fair Forge's code compares both expected calls
    with the first actual call: (1 + 1/3) / 2 = 0.667 parameters, overall 0.917, not
    tool-correct. The paper scores matching parameters across all expected tools: 1.0."""
    ds = load_dataset(SAMPLE)
    turn = ds.conversations[0].turns[2]
    tc = ff(list(turn.tool_calls), ds.reference_set.references[0].turns[2])
    assert tc is not None
    assert tc.parameters == 1.0
    assert tc.correct


def test_sample_dataset_outcomes_with_tool_correctness_in_turn_correctness() -> None:
    ds = load_dataset(SAMPLE)
    refs = {r.id: r for r in ds.reference_set.references}
    # answers graded by keyword so the example needs no LLM: "42", "18", "32.40"
    keyworded = Reference(
        id="kw",
        turns=tuple(
            t.model_copy(update={"graders": (), "expected_answer": kw})
            for t, kw in zip(
                refs["q1_math+q2_weather+q3_complex"].turns, ["42", "18", "32.40"], strict=True
            )
        ),
    )
    ev = Evaluator(EvaluationConfig(profile="fair-forge"))
    outcomes = {c.id: ev.evaluate(c, keyworded) for c in ds.conversations}
    assert outcomes["agentic_eval_session"].outcome == "pass"
    assert outcomes["agentic_eval_session2"].outcome == "pass"
    s3 = outcomes["agentic_eval_session3"]
    assert s3.outcome == "fail"
    # turn 1: "got 53" lacks 42 → wrong answer; turn 2: right answer but tools 0.875 < 1.0
    assert [t.correct for t in s3.turns] == [False, False, True]
    assert s3.turns[1].answer_correct is True


def test_set_jaccard_selection_vs_multiset() -> None:
    calls = [ToolCall(name="a"), ToolCall(name="a"), ToolCall(name="b")]
    turn = rt("a", ordered=False)
    tc = ff(calls, turn)
    assert tc is not None
    assert tc.selection == 0.5
    default = tool_correctness(calls, compile_turn(turn), answer=None, declared=True)
    assert default is not None
    assert default.selection == pytest.approx(1 / 3)


def test_step_index_sequence_vs_lcs() -> None:
    calls = [ToolCall(name="x"), ToolCall(name="a"), ToolCall(name="b")]
    turn = rt("a", "b")
    tc = ff(calls, turn)
    assert tc is not None
    assert tc.sequence == 0.0
    default = tool_correctness(calls, compile_turn(turn), answer=None, declared=True)
    assert default is not None
    assert default.sequence == 1.0


def test_parameter_credit_python_semantics() -> None:
    assert fair_forge_parameter_credit({"a": 1, "b": None}, {"a": 1}) == 1.0
    assert fair_forge_parameter_credit({"x": True}, {"x": 1}) == 1.0
    assert fair_forge_parameter_credit({"a": 1, "b": 2}, {"a": 1, "c": 3}) == pytest.approx(1 / 3)


def test_missing_name_counts_once() -> None:
    tc = ff([ToolCall(name="a")], rt("a", "b"))
    assert tc is not None
    assert (tc.selection, tc.parameters, tc.sequence) == (0.5, 0.5, 0.5)


def test_fixed_cases() -> None:
    # expected but none called: 0 everywhere (Fair Forge: None, turn escapes checking)
    tc = ff([], rt("a"))
    assert tc is not None
    assert tc.overall == 0.0
    assert not tc.correct
    # parameters: null → not checked (Fair Forge: AttributeError)
    tc = ff([ToolCall(name="a", arguments={"x": 1})], rt(ExpectedTool(name="a", arguments=None)))
    assert tc is not None
    assert tc.parameters == 1.0
    # no tools expected, none called → not applicable
    assert ff([], rt()) is None
    assert ff([ToolCall(name="a")], ReferenceTurn(query="q")) is None


def test_none_expected_some_called_reproduces_fair_forge() -> None:
    tc = ff([ToolCall(name="a")], rt(ordered=False))
    assert tc is not None
    assert (tc.selection, tc.parameters, tc.sequence, tc.utilization) == (0.0, 0.0, 1.0, 1.0)
    assert tc.overall == 0.5


def test_weights_are_not_normalized() -> None:
    tc = ff([ToolCall(name="a")], rt("a"), weights=(1.0, 1.0, 1.0, 1.0), tool_threshold=1.0)
    assert tc is not None
    assert tc.overall == 4.0


def test_declared_flag_missing_means_unused() -> None:
    tc = ff([ToolCall(name="a", result="Paris")], rt("a"), declared=None)
    assert tc is not None
    assert tc.utilization == 0.0


def test_turn_type_default_profile_same_sample_numbers() -> None:
    """On the sample, the default profile agrees with the fair-forge profile."""
    ds = load_dataset(SAMPLE)
    ref = ds.reference_set.references[0]
    for conv in ds.conversations:
        for turn, rturn in zip(conv.turns, ref.turns, strict=True):
            a = ff(list(turn.tool_calls), rturn, turn.final_answer_uses_tools)
            b = tool_correctness(
                turn.tool_calls,
                compile_turn(rturn),
                answer=turn.answer,
                declared=turn.final_answer_uses_tools,
            )
            assert a is not None
            assert b is not None
            assert a.overall == pytest.approx(b.overall)
    assert isinstance(ds.conversations[0].turns[0], Turn)


# --------------------------------------------------------------- Fair Forge's crash cases


def _ff_dataset(agentic: object, ground_truth_agentic: object) -> list[dict[str, object]]:
    return [
        {
            "session_id": "s1",
            "assistant_id": "a1",
            "language": "english",
            "context": "",
            "conversation": [
                {
                    "qa_id": "q1",
                    "query": "What's the weather in Paris?",
                    "assistant": "It is 18 degrees in Paris.",
                    "ground_truth_assistant": "18 degrees",
                    "agentic": agentic,
                    "ground_truth_agentic": ground_truth_agentic,
                }
            ],
        }
    ]


def _score(data: object, tmp_path: Path, profile: str) -> ConversationResult:
    import json

    p = tmp_path / "ff.json"
    p.write_text(json.dumps(data))
    ds = load_dataset(p)
    (ref,) = ds.reference_set.references
    (conv,) = ds.conversations
    return Evaluator(EvaluationConfig(profile=profile)).evaluate(conv, ref)  # type: ignore[arg-type]  # str → Literal


@pytest.mark.parametrize("profile", ["fair-forge", "default"])
def test_parameters_null_on_both_sides_does_not_crash(tmp_path: Path, profile: str) -> None:
    """Fair Forge 3.0.0 raises AttributeError on `parameters: null`; here null expected
    parameters mean "not checked" and null actual parameters are an empty mapping."""
    data = _ff_dataset(
        {
            "tools_used": [
                {"tool_name": "get_weather", "parameters": None, "result": {"temp": 18}, "step": 1}
            ],
            "final_answer_uses_tools": True,
        },
        {
            "expected_tools": [{"tool_name": "get_weather", "parameters": None, "step": 1}],
            "tool_sequence_matters": True,
        },
    )
    result = _score(data, tmp_path, profile)
    (turn,) = result.turns
    tc = turn.tool_correctness
    assert tc is not None
    assert (tc.selection, tc.parameters, tc.sequence, tc.utilization) == (1.0, 1.0, 1.0, 1.0)
    assert result.outcome == "pass"


@pytest.mark.parametrize("profile", ["fair-forge", "default"])
def test_expected_tools_but_empty_tools_used_scores_zero_not_none(
    tmp_path: Path, profile: str
) -> None:
    data = _ff_dataset(
        {"tools_used": [], "final_answer_uses_tools": False},
        {"expected_tools": [{"tool_name": "get_weather", "parameters": {"city": "Paris"}}]},
    )
    result = _score(data, tmp_path, profile)
    tc = result.turns[0].tool_correctness
    assert tc is not None
    assert tc.overall == 0.0
    assert result.outcome == "fail"


def test_empty_dataset_yields_nothing_instead_of_dividing_by_zero(tmp_path: Path) -> None:
    from tracepass.evaluator.passk import estimate
    from tracepass.evaluator.references import import_fair_forge

    empty = import_fair_forge([])
    assert empty.reference_set.references == ()
    assert empty.conversations == ()
    p = tmp_path / "empty.json"
    p.write_text("[]")
    ds = load_dataset(p)
    assert ds.reference_set.references == ()
    assert ds.conversations == ()
    # no conversations → no trials: pass@k is "no data", not 0 and not a ZeroDivisionError
    assert not estimate(0, 0, 3).has_data


def test_empty_agentic_blocks_mean_not_checked(tmp_path: Path) -> None:
    """`ground_truth_agentic: {}` (or null) skips tool checking, as in Fair Forge."""
    gtas: tuple[dict[str, object] | None, ...] = ({}, None)
    for gta in gtas:
        result = _score(_ff_dataset({}, gta), tmp_path, "fair-forge")
        assert result.turns[0].tool_correctness is None
