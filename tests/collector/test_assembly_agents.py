"""Assembly's generic rules for who did what in a turn and where a turn starts: agent
steps and each call's agent (assembly/steps.py), continuations of agent-less traces
(continuation.py), runs linked by id (runs.py), the agent name from any span before the
resource's. The real stacks are in the corpus (tests/frameworks: every scenario is
checked against these rules); these pin each rule on its own."""

from __future__ import annotations

from _pipeline_support import MODEL, OTHER, TOOL, TURN, rec

from tracepass.collector.assembly import build_conversation
from tracepass.collector.normalize.registry import ROLE_ATTR, ROLE_HANDOFF, RUN_IDS_ATTR
from tracepass.evaluator.models import ToolCall


def _handoff(trace: int, span: int, parent: int, agent: str, start: int) -> object:
    return rec(
        trace,
        span,
        parent,
        OTHER,
        conv="c",
        start=start,
        agent_name=agent,
        attributes={ROLE_ATTR: ROLE_HANDOFF},
    )


def test_sub_agents_are_steps_and_each_call_keeps_its_agent() -> None:
    records = [
        rec(1, 1, None, TURN, conv="c", start=0, end=100, input_text="q", output_text="a",
            agent_name="supervisor", service_name="svc"),
        rec(1, 2, 1, TURN, conv="c", start=10, end=50, agent_name="researcher",
            input_text="find it", output_text="found"),
        rec(1, 3, 2, TOOL, conv="c", start=20, tool_name="search"),
        rec(1, 4, 1, TOOL, conv="c", start=60, tool_name="reply"),
    ]  # fmt: skip
    (turn,) = build_conversation("c", records).turns
    assert [(c.name, c.agent) for c in turn.tool_calls] == [
        ("search", "researcher"),
        ("reply", "supervisor"),
    ]
    (step,) = turn.steps
    assert (step.agent, step.kind, step.query, step.answer, step.tool_calls) == (
        "researcher",
        "agent",
        "find it",
        "found",
        (0,),
    )


def test_a_single_agent_seen_twice_has_no_steps() -> None:
    records = [
        rec(1, 1, None, TURN, conv="c", start=0, agent_name="svc", service_name="svc"),
        rec(1, 2, 1, TURN, conv="c", start=1, agent_name="bot", service_name="svc"),
        rec(1, 3, 2, TOOL, conv="c", start=2, tool_name="t", service_name="svc"),
    ]
    conv = build_conversation("c", records)
    (turn,) = conv.turns
    assert turn.steps == ()
    assert turn.tool_calls[0].agent == "bot"
    # The conversation's agent is the one a span names, not the resource's service.
    assert conv.agent_name == "bot"


def test_a_hand_off_labels_the_step_of_the_agent_it_hands_to() -> None:
    records = [
        rec(1, 1, None, TURN, conv="c", start=0, end=100, input_text="book it"),
        rec(1, 2, 1, TURN, conv="c", start=1, end=20, agent_name="triage"),
        _handoff(1, 3, 2, "booking", 15),
        rec(1, 4, 1, TURN, conv="c", start=30, end=90, agent_name="booking"),
        rec(1, 5, 4, MODEL, conv="c", start=35, input_text="book it", output_text="done"),
        rec(1, 6, 4, TOOL, conv="c", start=40, tool_name="book"),
    ]
    (turn,) = build_conversation("c", records).turns
    assert [(s.agent, s.kind, s.tool_calls) for s in turn.steps] == [
        ("triage", "agent", ()),
        ("booking", "handoff", (0,)),
    ]
    assert turn.steps[1].answer == "done"
    assert turn.tool_calls[0].agent == "booking"


def test_a_hand_off_without_the_target_agent_span_is_a_step_of_its_own() -> None:
    records = [
        rec(1, 1, None, TURN, conv="c", start=0, end=100, agent_name="triage"),
        _handoff(1, 2, 1, "booking", 10),
        rec(1, 3, 2, TOOL, conv="c", start=20, tool_name="book"),
    ]
    (turn,) = build_conversation("c", records).turns
    assert [(s.agent, s.kind, s.tool_calls) for s in turn.steps] == [("booking", "handoff", (0,))]


def test_nested_steps_nest() -> None:
    records = [
        rec(1, 1, None, TURN, conv="c", start=0, end=100, agent_name="a"),
        rec(1, 2, 1, TURN, conv="c", start=1, end=90, agent_name="b"),
        rec(1, 3, 2, TURN, conv="c", start=2, end=80, agent_name="c"),
        rec(1, 4, 3, TOOL, conv="c", start=3, tool_name="t"),
    ]
    (turn,) = build_conversation("c", records).turns
    (outer,) = turn.steps
    (inner,) = outer.steps
    assert (outer.agent, inner.agent, inner.tool_calls) == ("b", "c", (0,))


def test_agent_less_traces_without_a_query_continue_the_turn_before() -> None:
    calls = (ToolCall(name="book", arguments={"id": "FL-1"}, call_id="k1"),)
    records = [
        rec(1, 1, None, TURN, conv="c", start=0, end=50, input_text="q1", output_text="a1"),
        rec(1, 2, 1, MODEL, conv="c", start=1, requested_tool_calls=calls),
        rec(2, 3, None, TOOL, conv="c", start=20, tool_name="book", error="sold out"),
        rec(3, 4, None, TURN, conv="c", start=100, input_text="q2", output_text="a2"),
    ]
    conv = build_conversation("c", records)
    assert [t.query for t in conv.turns] == ["q1", "q2"]
    (call,) = conv.turns[0].tool_calls
    # joined before the calls are built: the arguments come from the turn's model request
    assert (call.arguments, call.error) == ({"id": "FL-1"}, "sold out")
    assert conv.turns[0].error is None  # the tool's error is not the turn's


def test_agent_spans_without_a_query_stay_turns() -> None:
    """Content capture off: every turn lacks its query, none may swallow the next."""
    records = [rec(t, t, None, TURN, conv="c", start=t * 100) for t in (1, 2, 3)]
    assert len(build_conversation("c", records).turns) == 3


def test_a_model_trace_with_a_new_user_message_is_a_new_turn() -> None:
    records = [
        rec(1, 1, None, MODEL, conv="c", start=0, input_text="q1", output_text="a"),
        rec(2, 2, None, MODEL, conv="c", start=10, input_text="q1", output_text="b"),
        rec(3, 3, None, MODEL, conv="c", start=20, input_text="q2", output_text="c"),
    ]
    turns = build_conversation("c", records).turns
    assert [(t.query, t.answer) for t in turns] == [("q1", "b"), ("q2", "c")]


def test_runs_linked_by_id_are_one_turn() -> None:
    def run(run_id: str, parent: str | None) -> dict[str, object]:
        return {RUN_IDS_ATTR: [run_id, parent]}

    records = [
        rec(1, 1, None, TURN, conv="c", start=0, end=100, attributes=run("r1", None)),
        rec(2, 2, None, OTHER, conv="c", start=1, attributes=run("r2", "r1")),
        rec(3, 3, None, MODEL, conv="c", start=2, input_text="q", output_text="a",
            attributes=run("r3", "r2")),
        rec(4, 4, None, TURN, conv="c", start=200, input_text="q2", attributes=run("r4", None)),
    ]  # fmt: skip
    conv = build_conversation("c", records)
    assert [(t.query, t.answer) for t in conv.turns] == [("q", "a"), ("q2", None)]
    # every trace the spans came in is still listed
    assert len(conv.trace_ids) == 4
