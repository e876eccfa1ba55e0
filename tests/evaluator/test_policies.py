"""Agent policies and learned checks: the loader, each check and rule, the outcome rules
(policy alone, reference + policy, neither), and the reference-free LLM grader."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from tracepass.evaluator.judge.llm_judge import LLMJudge
from tracepass.evaluator.models import (
    Conversation,
    Outcome,
    Policy,
    Reference,
    ReferenceTurn,
    ToolCall,
    ToolDefinition,
    Turn,
)
from tracepass.evaluator.references import ReferenceLoadError, load_reference_sets
from tracepass.evaluator.scoring.agent_policies import find_policy
from tracepass.evaluator.scoring.evaluator import EvaluationConfig, Evaluator
from tracepass.evaluator.scoring.learned_checks import learned_violations

BOOK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["flight_id", "passengers"],
    "properties": {"flight_id": {"type": "string"}, "passengers": {"type": "integer"}},
}
OFFERED = (
    ToolDefinition(name="search_flights", parameters={"type": "object"}),
    ToolDefinition(name="book_flight", parameters=BOOK_SCHEMA),
)

POLICY_YAML = """\
name: travel
policies:
  - id: travel-agent-policy
    agent: travel-*
    version: "2.*"
    tools:
      search_flights: {}
      book_flight: {arguments_schema: {type: object, required: [flight_id]}}
    rules:
      - {type: order, first: search_flights, then: book_flight}
      - {type: forbidden_tool, name: delete_account}
      - {type: max_tool_calls, per_turn: 3}
      - {type: requires_tool, when_query_matches: "refund", name: lookup_order}
    graders:
      - {type: regex, pattern: "Traceback", must_match: false}
"""


def turn(*calls: ToolCall, query: str = "book me a flight", offered: Any = OFFERED) -> Turn:
    return Turn(query=query, answer="Booked.", tool_calls=calls, offered_tools=offered)


def conv(*turns: Turn, agent: str = "travel-agent", version: str = "2.1") -> Conversation:
    return Conversation(id="c1", agent_name=agent, agent_version=version, turns=turns)


SEARCH = ToolCall(name="search_flights", arguments={"to": "LIS"})
BOOK = ToolCall(name="book_flight", arguments={"flight_id": "TP1", "passengers": 2})


def rules_of(violations: list[list[Any]]) -> list[list[tuple[str, int | None]]]:
    return [[(v.rule, v.tool_call) for v in vs] for vs in violations]


# ----------------------------------------------------------------------------- loader


def test_policies_load_with_references(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(POLICY_YAML)
    (rs,) = load_reference_sets([tmp_path])
    (policy,) = rs.policies
    assert policy.id == "travel-agent-policy"
    assert policy.version == "2.*"
    assert [t.name for t in policy.tools or ()] == ["search_flights", "book_flight"]
    assert [r.type for r in policy.rules] == [
        "order",
        "forbidden_tool",
        "max_tool_calls",
        "requires_tool",
    ]
    assert policy.graders[0].type == "regex"


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        (
            ("{type: order, first: search_flights, then: book_flight}", "{type: order, first: x}"),
            "p.yaml:10: policies[0].rules[0]: a order rule needs 'then'",
        ),
        (
            ("{type: forbidden_tool, name: delete_account}", "{type: nope}"),
            "p.yaml:11: policies[0].rules[1].type: expected one of order, forbidden_tool,",
        ),
        (
            ("per_turn: 3", "per_turn: -1"),
            "p.yaml:12: policies[0].rules[2].per_turn: expected a positive integer, got -1",
        ),
        (
            ('"refund"', '"(refund"'),
            "p.yaml:13: policies[0].rules[3].when_query_matches: invalid regex '(refund'",
        ),
        (
            ("required: [flight_id]", "required: flight_id"),
            "p.yaml:8: policies[0].tools.book_flight.arguments_schema: invalid JSON Schema",
        ),
        (
            ("must_match: false", "must_match: nope"),
            "p.yaml:15: policies[0].graders[0]",
        ),
        (("agent: travel-*", "agnet: travel-*"), "p.yaml:4: policies[0].agnet: unknown field"),
    ],
)
def test_policy_errors_point_at_file_line_and_field(
    tmp_path: Path, broken: tuple[str, str], message: str
) -> None:
    (tmp_path / "p.yaml").write_text(POLICY_YAML.replace(*broken))
    with pytest.raises(ReferenceLoadError) as info:
        load_reference_sets([tmp_path / "p.yaml"])
    assert str(info.value).startswith(str(tmp_path / message))


def test_duplicate_policy_ids_across_files(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(POLICY_YAML)
    (tmp_path / "b.yaml").write_text(POLICY_YAML)
    with pytest.raises(ReferenceLoadError, match="duplicate policy id 'travel-agent-policy'"):
        load_reference_sets([tmp_path])


def test_find_policy_by_agent_and_version_glob() -> None:
    p = Policy(id="p", agent="travel-*", version="2.*")
    q = Policy(id="q", agent="travel-agent")
    assert find_policy([p, q], "travel-agent", "2.3") is p
    assert find_policy([p, q], "travel-agent", "1.0") is q
    assert find_policy([p, q], "travel-agent", None) is q
    assert find_policy([p, q], "other", "2.0") is None
    assert find_policy([p, q], None, "2.0") is None


# ----------------------------------------------------------------------------- learned checks


def test_unknown_tool_only_when_the_offer_is_known() -> None:
    drop = ToolCall(name="delete_account")
    assert rules_of(learned_violations(conv(turn(SEARCH, drop)))) == [[("unknown_tool", 1)]]
    assert learned_violations(conv(turn(SEARCH, drop, offered=None))) == [[]]


def test_arguments_schema_keeps_path_and_message() -> None:
    bad = ToolCall(name="book_flight", arguments={"flight_id": "TP1", "passengers": "two"})
    ((v,),) = learned_violations(conv(turn(SEARCH, bad)))[:1]
    assert (v.rule, v.turn, v.tool_call, v.path) == ("arguments_schema", 0, 1, "$.passengers")
    assert v.message == "book_flight: $.passengers: 'two' is not of type 'integer'"
    missing = ToolCall(name="book_flight", arguments={"passengers": 1})
    ((m,),) = learned_violations(conv(turn(missing)))
    assert m.path == "$"
    assert "'flight_id' is a required property" in m.message
    raw = ToolCall(name="book_flight", arguments={"_raw": "{flight"})
    ((r,),) = learned_violations(conv(turn(raw)))
    assert r.message.startswith("book_flight: $: arguments are not a JSON object")


def test_schema_from_the_tool_span_and_invalid_schemas_skipped() -> None:
    t = Turn(
        query="q",
        tool_calls=(ToolCall(name="f", arguments={"x": "1"}),),
        tool_schemas={"f": {"type": "object", "properties": {"x": {"type": "integer"}}}},
    )
    ((v,),) = learned_violations(conv(t))
    assert v.rule == "arguments_schema"
    broken = t.model_copy(update={"tool_schemas": {"f": {"type": 12}}})
    assert learned_violations(conv(broken)) == [[]]


def test_unrecovered_tool_error_and_recovery() -> None:
    fail = ToolCall(name="search_flights", arguments={"to": "LIS"}, error="timeout")
    other = ToolCall(name="book_flight", arguments={"flight_id": "x", "passengers": 1})
    assert rules_of(learned_violations(conv(turn(fail, other)))) == [
        [("unrecovered_tool_error", 0)]
    ]
    assert learned_violations(conv(turn(fail, SEARCH))) == [[]]


def test_repeated_call_limit_is_configurable() -> None:
    t = turn(SEARCH, SEARCH, SEARCH, SEARCH)
    assert rules_of(learned_violations(conv(t))) == [[("repeated_call", 2)]]
    assert learned_violations(conv(t), repeated_limit=4) == [[]]
    different = turn(SEARCH, ToolCall(name="search_flights", arguments={"to": "OPO"}), SEARCH)
    assert learned_violations(conv(different)) == [[]]


# ----------------------------------------------------------------------------- scoring


@pytest.fixture
def policy(tmp_path: Path) -> Policy:
    (tmp_path / "p.yaml").write_text(POLICY_YAML)
    return load_reference_sets([tmp_path])[0].policies[0]


def test_policy_alone_scores_pass_and_fail(policy: Policy) -> None:
    ev = Evaluator()
    ok = ev.evaluate(conv(turn(SEARCH, BOOK)), None, policy=policy)
    assert (ok.outcome, ok.reference_set, ok.policy_id, ok.violations) == (
        Outcome.PASS,
        "policy:travel-agent-policy",
        "travel-agent-policy",
        (),
    )
    assert ok.turns[0].correct is True
    assert ok.turns[0].policy_passed is True

    early = ev.evaluate(conv(turn(BOOK), turn(SEARCH, BOOK)), None, policy=policy)
    assert early.outcome is Outcome.FAIL
    assert [(v.rule, v.turn, v.tool_call) for v in early.violations] == [("order", 0, 0)]
    assert [t.correct for t in early.turns] == [False, True]

    many = ev.evaluate(
        conv(turn(SEARCH, ToolCall(name="delete_account"), BOOK, BOOK, query="a refund please")),
        None,
        policy=policy,
    )
    assert sorted(v.rule for v in many.violations) == [
        "forbidden_tool",
        "max_tool_calls",
        "requires_tool",
        "unknown_tool",
    ]


def test_policy_grader_failure_is_a_violation(policy: Policy) -> None:
    c = conv(Turn(query="q", answer="Traceback (most recent call last)", tool_calls=(SEARCH,)))
    r = Evaluator().evaluate(c, None, policy=policy)
    assert r.outcome is Outcome.FAIL
    assert [v.rule for v in r.violations] == ["grader"]
    assert r.turns[0].policy_graders[0].passed is False


def test_reference_and_policy_combine(policy: Policy) -> None:
    ref = Reference(
        id="r", turns=(ReferenceTurn(query="book me a flight", expected_answer="Booked"),)
    )
    ev = Evaluator()
    both_ok = ev.evaluate(conv(turn(SEARCH, BOOK)), ref, reference_set="travel", policy=policy)
    assert (both_ok.outcome, both_ok.reference_set, both_ok.policy_outcome) == (
        Outcome.PASS,
        "travel",
        Outcome.PASS,
    )
    policy_fails = ev.evaluate(conv(turn(BOOK)), ref, reference_set="travel", policy=policy)
    assert (policy_fails.outcome, policy_fails.policy_outcome) == (Outcome.FAIL, Outcome.FAIL)
    assert policy_fails.turns[0].correct is False


def test_learned_checks_reported_but_not_deciding_without_policy() -> None:
    r = Evaluator().evaluate(conv(turn(ToolCall(name="delete_account"))), None)
    assert r.outcome is Outcome.UNSCORED
    assert r.policy_id is None
    assert [v.rule for v in r.turns[0].violations] == ["unknown_tool"]
    incomplete = conv(turn(BOOK)).model_copy(update={"complete": False})
    assert Evaluator().evaluate(incomplete, None).outcome is Outcome.INCOMPLETE


def test_repeated_call_rule_overrides_config() -> None:
    p = Policy.model_validate(
        {"id": "p", "agent": "*", "rules": [{"type": "repeated_call", "limit": 5}]}
    )
    c = conv(turn(SEARCH, SEARCH, SEARCH))
    assert Evaluator().evaluate(c, None, policy=p).outcome is Outcome.PASS
    cfg = EvaluationConfig(repeated_call_limit=1)
    assert Evaluator(cfg).evaluate(c, None).violations[0].rule == "repeated_call"


async def test_llm_grader_with_rubric_and_no_reference() -> None:
    model = FakeListChatModel(
        responses=['```json\n{"reasoning": "invents a price", "score": 0.2}\n```']
    )
    judge = LLMJudge(model, use_structured_output=False, backoff_s=0.0)
    rubric = "The answer resolves the user's request without inventing facts."
    p = Policy.model_validate(
        {"id": "p", "agent": "*", "graders": [{"type": "llm", "rubric": rubric}]}
    )
    c = conv(Turn(query="price to Lisbon?", answer="It costs 12 euros.", offered_tools=()))
    r = await Evaluator(judge=judge).aevaluate(c, None, policy=p)
    assert r.outcome is Outcome.FAIL
    (v,) = r.violations
    assert v.rule == "grader"
    assert "invents a price" in v.message
    human = judge.build_messages("q", "a", None, criteria="be </criteria> nice")[1].content
    assert "<criteria>\nbe &lt;/criteria> nice\n</criteria>" in str(human)
    assert "No reference answer is given" in str(human)
