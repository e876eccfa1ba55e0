"""Simulated users: the `user:` reference schema with its precise errors, the folded
turn a scenario reference is scored on, the conversation loop's stop conditions and
the simulator audit (collector/app/probe/simulation.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from tracepass.collector.app.probe.simulation import (
    MAX_USER_MESSAGE_CHARS,
    SimulatedConversation,
    audit,
    simulate,
)
from tracepass.collector.app.probe.targets import NextQuery
from tracepass.evaluator.models import (
    STOP_MARKER,
    Conversation,
    ToolCall,
    Turn,
    UserScenario,
)
from tracepass.evaluator.references import ReferenceLoadError, parse_reference
from tracepass.evaluator.scoring import Evaluator

SCENARIO = UserScenario(
    instructions="book", max_turns=3, must_say=("TP1",), must_not_say=("cancel",)
)


class Script:
    def __init__(self, lines: Sequence[str]) -> None:
        self.lines = list(lines)

    def describe(self) -> dict[str, object]:
        return {}

    async def reply(self, scenario: UserScenario, reference_id: str, transcript: object) -> str:
        if not self.lines:
            raise RuntimeError("script ran out")
        return self.lines.pop(0)


def run(lines: Sequence[str], answers: Sequence[str], opening: str = "") -> SimulatedConversation:
    async def converse(next_query: NextQuery) -> list[str]:
        got: list[str] = []
        while await next_query(got) is not None:
            got.append(answers[len(got)] if len(got) < len(answers) else "ok")
        return got

    return asyncio.run(simulate(converse, Script(lines), SCENARIO, "r", opening))


def test_stop_marker_max_turns_agent_error_and_simulator_error() -> None:
    sim = run(["book TP1", f"thanks {STOP_MARKER}"], ["booked"])
    assert (sim.ended_by, sim.user_messages, sim.answers) == ("user_stop", ["book TP1"], ["booked"])
    assert audit(SCENARIO, sim) == []
    sim = run(["a", "b", "c", "d"], [])
    assert sim.ended_by == "max_turns"
    assert len(sim.user_messages) == 3
    assert audit(SCENARIO, sim) == ["the user never said 'TP1', which its instructions require"]
    sim = run(["TP1 please", "again"], ["[agent error: HTTP 400: bad]"])
    assert sim.ended_by == "agent_error"
    assert audit(SCENARIO, sim) == []  # the agent broke off: must_say is not asked
    sim = run([], [])
    assert sim.ended_by == "simulator_error"
    assert audit(SCENARIO, sim)[0].startswith("simulator failed: RuntimeError")
    # The opening comes from the reference, not the simulator.
    sim = run([STOP_MARKER], ["hi"], opening="TP1 for me")
    assert sim.user_messages == ["TP1 for me"]


def test_audit_catches_a_straying_user() -> None:
    sim = run([STOP_MARKER], [])
    assert "ended the conversation before saying anything" in audit(SCENARIO, sim)[0]
    sim = run(["TP1, or cancel it", STOP_MARKER], [])
    assert audit(SCENARIO, sim) == ["the user said 'cancel', which its instructions forbid"]
    sim = run(["TP1 " + "x" * (2 * MAX_USER_MESSAGE_CHARS), STOP_MARKER], [])
    assert len(sim.user_messages[0]) == MAX_USER_MESSAGE_CHARS  # bounded
    assert any("characters" in p for p in audit(SCENARIO, sim))
    sim = run(["TP1 ##STOP##", STOP_MARKER], [])
    assert any("mangled stop marker" in p for p in audit(SCENARIO, sim))


def test_user_scenario_schema() -> None:
    ref = parse_reference(
        {
            "id": "s",
            "user": {"instructions": "book TP1", "persona": "terse", "max_turns": 4,
                     "must_say": ["TP1"]},
            "expected_tools": ["book"],
        }
    )  # fmt: skip
    assert ref.user is not None
    assert ref.user.max_turns == 4
    assert ref.turns[0].query == ""  # the simulator opens
    for bad, where in [
        ({"id": "s", "user": {"persona": "x"}}, "user.instructions"),
        ({"id": "s", "user": {"instructions": "x", "max_turns": 0}}, "user.max_turns"),
        ({"id": "s", "user": {"instructions": "x", "mood": "sad"}}, "mood"),
        ({"id": "s", "user": {"instructions": "x"}, "turns": ["a", "b"]}, "turns"),
        ({"id": "s", "user": {"instructions": "x", "must_say": "TP1"}}, "user.must_say"),
    ]:
        with pytest.raises(ReferenceLoadError) as info:
            parse_reference(bad)
        assert where in str(info.value), (bad, str(info.value))


def test_scenario_reference_is_scored_on_the_folded_conversation() -> None:
    ref = parse_reference(
        {
            "id": "s",
            "user": {"instructions": "x"},
            "expected_answer": "booked",
            "expected_tools": ["search", "book"],
            "tool_sequence_matters": True,
        }
    )
    turns = (
        Turn(query="hi", answer="where to?"),
        Turn(query="Lisbon", answer="found", tool_calls=(ToolCall(name="search"),)),
        Turn(query="book it", answer="booked", tool_calls=(ToolCall(name="book"),)),
    )
    result = Evaluator().evaluate(Conversation(id="c", turns=turns), ref)
    assert result.correct
    (turn,) = result.turns
    assert turn.query == "hi"
    assert turn.answer == "booked"
    assert [c.name for c in turn.tool_calls] == ["search", "book"]
    # The same turns against the plain (unsimulated) reference: not folded, not correct.
    plain = ref.model_copy(update={"user": None})
    assert not Evaluator().evaluate(Conversation(id="c", turns=turns), plain).correct
