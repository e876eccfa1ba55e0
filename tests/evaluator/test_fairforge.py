"""The fair-forge profile: Fair Forge 3.0.0's published definitions, hand-computed on its
own sample dataset, plus the places where we follow the paper over the code."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracepass.evaluator.models import (
    ConversationResult,
    ExpectedTool,
    Reference,
    ReferenceTurn,
    ToolCall,
    ToolCorrectness,
    Turn,
)
from tracepass.evaluator.references import load_dataset
from tracepass.evaluator.scoring.evaluator import EvaluationConfig, Evaluator
from tracepass.evaluator.scoring.fairforge_profile import (
    fair_forge_parameter_credit,
    fair_forge_tool_correctness,
)
from tracepass.evaluator.scoring.tool_correctness import (
    compile_turn,
    make_tool_correctness,
    tool_correctness,
)

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
    from tracepass.evaluator.references import import_fair_forge
    from tracepass.evaluator.stats.passk import estimate

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


# ------------------------------------------------------- repeated tool names: best-fit pairs


def _rank_paired(
    calls: Sequence[ToolCall], turn: ReferenceTurn, declared: bool | None
) -> ToolCorrectness | None:
    """The profile as it was before best-fit pairing: the i-th expected call of a name
    against the i-th actual call of that name, an uncalled name one 0.0. Kept as the
    oracle for "turns without repeated names score exactly as before"."""
    expected = turn.expected_tools
    if expected is None or (not expected and not calls):
        return None
    if expected and not calls:
        return make_tool_correctness(0.0, 0.0, 0.0, 0.0, (0.25,) * 4, 1.0)
    used_names = {c.name for c in calls}
    exp_names = {t.name for t in expected}
    union = used_names | exp_names
    s = len(used_names & exp_names) / len(union) if union else 1.0
    used_by: dict[str, list[int]] = {}
    for pos, c in enumerate(calls):
        used_by.setdefault(c.name, []).append(pos)
    exp_by: dict[str, list[int]] = {}
    for j, t in enumerate(expected):
        exp_by.setdefault(t.name, []).append(j)
    params: list[float] = []
    steps: list[float] = []
    for name, e_idx in exp_by.items():
        u_idx = used_by.get(name)
        if not u_idx:
            params.append(0.0)
            steps.append(0.0)
            continue
        for rank, j in enumerate(e_idx):
            i = u_idx[rank] if rank < len(u_idx) else None
            exp_args = expected[j].arguments
            if i is None:
                params.append(0.0)
            elif exp_args is None:
                params.append(1.0)
            else:
                params.append(fair_forge_parameter_credit(exp_args, calls[i].arguments))
            steps.append(1.0 if i is not None and i == j else 0.0)
    p = sum(params) / len(params) if params else 0.0
    q = (sum(steps) / len(steps) if steps else 0.0) if turn.tool_sequence_matters else 1.0
    u = 1.0 if declared else 0.0
    return make_tool_correctness(s, p, q, u, (0.25,) * 4, 1.0)


def _scores(tc: ToolCorrectness | None) -> tuple[float, float, float, float] | None:
    return None if tc is None else (tc.selection, tc.parameters, tc.sequence, tc.utilization)


def _call(name: str, **arguments: object) -> ToolCall:
    return ToolCall(name=name, arguments=arguments)


def _exp(name: str, **arguments: object) -> ExpectedTool:
    return ExpectedTool(name=name, arguments=arguments)


def test_repeated_name_missing_call_costs_parameters_not_everything() -> None:
    """Two emails expected, only the second sent: the sent one pairs with its own
    expected call (0.5), not with the first expected call (0.0)."""
    turn = rt(_exp("send_email", to="a"), _exp("send_email", to="b"), ordered=False)
    calls = [_call("send_email", to="b")]
    assert _scores(ff(calls, turn)) == (1.0, 0.5, 1.0, 1.0)
    old = _rank_paired(calls, turn, True)
    assert old is not None
    assert old.parameters == 0.0


def test_repeated_name_swap_costs_sequence_not_parameters() -> None:
    """Subtract then multiply expected, done the other way round: both calls are right
    (parameters 1.0) and out of order (sequence 0.0)."""
    subtract = {"operation": "subtract", "a": 13, "b": 22}
    multiply = {"operation": "multiply", "a": 21, "b": 60}
    turn = rt(_exp("calculator", **subtract), _exp("calculator", **multiply), ordered=True)
    calls = [_call("calculator", **multiply), _call("calculator", **subtract)]
    tc = ff(calls, turn)
    assert _scores(tc) == (1.0, 1.0, 0.0, 1.0)
    assert tc is not None
    assert not tc.correct
    old = _rank_paired(calls, turn, True)
    assert old is not None
    assert (old.parameters < 1.0, old.sequence) == (True, 1.0)  # charged to the wrong one


def test_repeated_name_uncalled_counts_per_expected_call() -> None:
    turn = rt("a", "a", "b", ordered=False)
    assert _scores(ff([ToolCall(name="b")], turn)) == pytest.approx((0.5, 1 / 3, 1.0, 1.0))


def test_identical_arguments_pair_in_order() -> None:
    """Ties (identical arguments) pair first with first, so a correct run in order keeps
    sequence 1.0 and a single call takes the first of the tied expected calls."""
    turn = rt(_exp("f", x=1), _exp("f", x=1), ordered=True)
    assert _scores(ff([_call("f", x=1), _call("f", x=1)], turn)) == (1.0, 1.0, 1.0, 1.0)
    assert _scores(ff([_call("f", x=1)], turn)) == (1.0, 0.5, 0.5, 1.0)
    # equally partial fits (one of two keys each): still the first expected call
    turn = rt(_exp("f", x=1, y=2), _exp("f", x=1, y=3), ordered=True)
    assert _scores(ff([_call("f", x=1, y=9)], turn)) == (1.0, 0.25, 0.5, 1.0)
    # identical actual calls against distinct expected ones: also in order
    turn = rt(_exp("f", x=1), _exp("f", x=2), ordered=True)
    assert _scores(ff([_call("f", x=3), _call("f", x=3)], turn)) == (1.0, 0.0, 1.0, 1.0)


_NAMES = ("a", "b", "c", "d")
_values = st.none() | st.booleans() | st.integers(-2, 2) | st.sampled_from(["x", "y"])
_arguments = st.dictionaries(st.sampled_from(["k", "l", "m"]), _values, max_size=3)


@st.composite
def _unique_name_turns(draw: st.DrawFn) -> tuple[list[ToolCall], ReferenceTurn, bool | None]:
    exp_names = draw(st.lists(st.sampled_from(_NAMES), unique=True, max_size=4))
    call_names = draw(st.lists(st.sampled_from(_NAMES), unique=True, max_size=4))
    expected = tuple(
        ExpectedTool(name=n, arguments=draw(st.none() | _arguments)) for n in exp_names
    )
    calls = [ToolCall(name=n, arguments=draw(_arguments)) for n in call_names]
    turn = ReferenceTurn(
        query="q", expected_tools=expected, tool_sequence_matters=draw(st.booleans())
    )
    return calls, turn, draw(st.none() | st.booleans())


@settings(deadline=None, max_examples=300)
@given(_unique_name_turns())
def test_unique_names_score_exactly_as_before(
    case: tuple[list[ToolCall], ReferenceTurn, bool | None],
) -> None:
    calls, turn, declared = case
    assert _scores(ff(calls, turn, declared)) == _scores(_rank_paired(calls, turn, declared))


@st.composite
def _repeated_name_turns(draw: st.DrawFn) -> tuple[list[ToolCall], ReferenceTurn]:
    exp_names = draw(st.lists(st.sampled_from(_NAMES[:2]), min_size=1, max_size=4))
    call_names = draw(st.lists(st.sampled_from(_NAMES[:2]), min_size=1, max_size=4))
    expected = tuple(ExpectedTool(name=n, arguments=draw(_arguments)) for n in exp_names)
    calls = [ToolCall(name=n, arguments=draw(_arguments)) for n in call_names]
    return calls, ReferenceTurn(query="q", expected_tools=expected, tool_sequence_matters=True)


@settings(deadline=None, max_examples=300)
@given(_repeated_name_turns())
def test_parameters_are_the_best_one_to_one_fit(
    case: tuple[list[ToolCall], ReferenceTurn],
) -> None:
    """Brute force: parameters = max over every name-preserving one-to-one pairing of the
    summed credit, over the number of expected calls; sequence counts paired calls at
    their own step, so it never exceeds the share of expected calls that are paired."""
    calls, turn = case
    expected = turn.expected_tools
    assert expected is not None
    best = 0.0
    # each expected call takes a distinct actual call of its name, or none (-1)
    options = [[-1, *(i for i, c in enumerate(calls) if c.name == t.name)] for t in expected]
    for choice in itertools.product(*options):
        taken = [i for i in choice if i >= 0]
        if len(taken) != len(set(taken)):
            continue
        total = sum(
            fair_forge_parameter_credit(expected[j].arguments or {}, calls[i].arguments)
            for j, i in enumerate(choice)
            if i >= 0
        )
        best = max(best, total)
    tc = ff(calls, turn)
    assert tc is not None
    assert tc.parameters == pytest.approx(best / len(expected))
    n_paired = sum(
        min(sum(c.name == n for c in calls), sum(t.name == n for t in expected))
        for n in {t.name for t in expected}
    )
    assert tc.sequence <= n_paired / len(expected) + 1e-12
