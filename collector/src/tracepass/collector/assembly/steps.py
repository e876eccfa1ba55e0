"""Which agent did what inside one turn: agent steps and each tool call's agent.

Why: in a multi-agent system (a supervisor and its sub-agents, OpenAI Agents hand-offs)
the turn's tool calls are made by different agents, and "which agent called the tool"
is what a reference or a reviewer asks first. Spans say it: every agent run is an agent
span (a TURN record: `invoke_agent`, an OpenInference AGENT span, a framework's
sub-agent span), and a tool belongs to the nearest agent span above it. A hand-off is
noted on a record by its convention or adapter (`ROLE_ATTR = ROLE_HANDOFF`, the agent
handed to in `agent_name`).

Rules (docs/conventions.md, "Agent steps"):

* a record's *agent* is its declared agent name (`gen_ai.agent.name` or the
  convention's), never the resource's `service.name` fallback; an agent span that
  declares none acts for the agent above it;
* a nested agent span is a step when its agent differs from the agent it runs under
  (the same agent seen twice — a framework's run span inside its agent span — is one);
* a turn whose spans name fewer than two agents has no steps (a single agent); its
  tool calls still carry that agent's name;
* a step's query/answer are its span's, else its first model input / last model output;
* a hand-off record labels the next step of the agent it names (`kind="handoff"`), or
  is a step of its own when that agent has no span.
"""

from __future__ import annotations

from collections.abc import Sequence

from tracepass.collector.normalize import ROLE_ATTR, ROLE_HANDOFF
from tracepass.collector.records import RecordKind, SpanRecord
from tracepass.evaluator.models import AgentStep, ToolCall, construct_unchecked

_TURN = RecordKind.TURN
_MODEL = RecordKind.MODEL
_OTHER = RecordKind.OTHER
MAX_DEPTH = 512

KIND_AGENT = "agent"
KIND_HANDOFF = "handoff"


def declared_agent(rec: SpanRecord) -> str | None:
    """The agent a record names itself (not the resource's `service.name` fallback)."""
    name = rec.agent_name
    if not name or name == rec.service_name:
        return None
    return name


def agent_key(name: str | None) -> str:
    """An agent name compared ignoring case and punctuation (`Booking-Agent`,
    `booking_agent` and `booking agent` are one agent)."""
    return "".join(ch for ch in (name or "").casefold() if ch.isalnum())


def _is_agent_record(rec: SpanRecord) -> bool:
    return rec.kind is _TURN or rec.attributes.get(ROLE_ATTR) == ROLE_HANDOFF


class TurnAgents:
    """The agent records of one turn and who owns each record (computed once per turn)."""

    def __init__(self, root: SpanRecord, members: Sequence[SpanRecord]) -> None:
        self.root = root
        self.index = {r.span_id: r for r in members}
        self.index[root.span_id] = root
        self.agents = [r for r in members if _is_agent_record(r)]
        self._named: dict[str, str | None] = {}

    def owner(self, rec: SpanRecord) -> SpanRecord:
        """The nearest agent record above `rec` (the turn's root when none)."""
        parent = rec.parent_span_id
        root_id = self.root.span_id
        steps = 0
        while parent is not None and parent != root_id and steps < MAX_DEPTH:
            node = self.index.get(parent)
            if node is None:
                break
            if node.kind is _TURN or node.attributes.get(ROLE_ATTR) == ROLE_HANDOFF:
                return node
            parent = node.parent_span_id
            steps += 1
        return self.root

    def agent_of(self, agent_rec: SpanRecord) -> str | None:
        """The agent an agent record acts for: its own declared name, else its owner's."""
        key = agent_rec.span_id
        if key in self._named:
            return self._named[key]
        name = declared_agent(agent_rec)
        if name is None and agent_rec is not self.root:
            name = self.agent_of(self.owner(agent_rec))
        self._named[key] = name
        return name

    def tool_agent(self, tool: SpanRecord) -> str | None:
        return self.agent_of(self.owner(tool))


def tool_agents(
    root: SpanRecord,
    members: Sequence[SpanRecord],
    tools: Sequence[SpanRecord],
    has_agents: bool,
) -> tuple[TurnAgents | None, list[str | None]]:
    """Each tool's agent, and the turn's agents when it has agent records below its root
    (`has_agents`, which the caller's pass over the members found; None: a single agent
    span, every call is the root's agent's)."""
    if not has_agents:
        name = declared_agent(root)
        return None, [name] * len(tools)
    agents = TurnAgents(root, members)
    return agents, [agents.tool_agent(t) for t in tools]


def is_handoff(rec: SpanRecord) -> bool:
    """A hand-off record (kept as OTHER with the hand-off role)."""
    return rec.kind is _OTHER and rec.attributes.get(ROLE_ATTR) == ROLE_HANDOFF


def agent_steps(
    agents: TurnAgents,
    tools: Sequence[SpanRecord],
    calls: Sequence[ToolCall],
    models: Sequence[SpanRecord],
) -> tuple[AgentStep, ...]:
    """The turn's steps (see the module doc); `tools` and `calls` are aligned."""
    root = agents.root
    names = {agents.agent_of(a) for a in agents.agents if agents.agent_of(a) is not None}
    root_agent = agents.agent_of(root)
    if root_agent is not None:
        names.add(root_agent)
    if len(names) < 2:
        return ()
    # Which agent record is a step: its agent differs from the agent it runs under.
    step_of: dict[str, SpanRecord] = {}  # agent record span id → the record of its step

    def step_record(agent_rec: SpanRecord) -> SpanRecord | None:
        """The step an agent record's work belongs to (None: the turn's own agent)."""
        node = agent_rec
        depth = 0
        while node is not root and depth < MAX_DEPTH:
            cached = step_of.get(node.span_id)
            if cached is not None:
                return cached
            above = agents.owner(node)
            if agents.agent_of(node) != agents.agent_of(above) or _is_handoff(node):
                step_of[node.span_id] = node
                return node
            node = above
            depth += 1
        return None

    ordered = sorted(agents.agents, key=lambda r: (r.start_ns, r.span_id))
    steps_in_order: list[SpanRecord] = []
    seen: set[str] = set()
    for rec in ordered:
        owner = step_record(rec)
        if owner is not None and owner.span_id not in seen:
            seen.add(owner.span_id)
            steps_in_order.append(owner)
    # A hand-off labels the next step of the agent it names (names compared ignoring
    # case and punctuation: a `transfer_to_booking_agent` tool names `booking-agent`);
    # one that names no agent (only its source) labels the next agent step.
    handed: dict[str, SpanRecord] = {}
    dropped: set[str] = set()
    for k, rec in enumerate(steps_in_order):
        if not _is_handoff(rec):
            continue
        named = declared_agent(rec)
        target = agent_key(named) if named is not None else None
        later = next(
            (
                s
                for s in steps_in_order[k + 1 :]
                if not _is_handoff(s)
                and (target is None or agent_key(agents.agent_of(s)) == target)
            ),
            None,
        )
        if later is not None:
            handed[later.span_id] = rec
            dropped.add(rec.span_id)

    call_indexes: dict[str | None, list[int]] = {}
    for i, tool in enumerate(tools[: len(calls)]):
        owner = step_record(agents.owner(tool))
        key = _step_key(owner, dropped)
        call_indexes.setdefault(key, []).append(i)
    model_steps: dict[str | None, list[SpanRecord]] = {}
    for model in models:
        owner = step_record(agents.owner(model))
        key = _step_key(owner, dropped)
        model_steps.setdefault(key, []).append(model)

    by_id = {r.span_id: r for r in steps_in_order}
    children: dict[str | None, list[str]] = {}
    for rec in steps_in_order:
        if rec.span_id in dropped:
            continue
        above = step_record(agents.owner(rec)) if rec is not root else None
        parent_key = _step_key(above, dropped)
        children.setdefault(parent_key, []).append(rec.span_id)

    def build(rec: SpanRecord) -> AgentStep:
        key = rec.span_id
        own_models = model_steps.get(key, [])
        query = rec.input_text
        if query is None:
            query = next((m.input_text for m in own_models if m.input_text is not None), None)
        answer = rec.output_text
        if answer is None:
            answer = next(
                (m.output_text for m in reversed(own_models) if m.output_text is not None), None
            )
        handoff = handed.get(key)
        return construct_unchecked(
            AgentStep,
            {
                "agent": agents.agent_of(rec),
                "kind": KIND_HANDOFF if handoff is not None or _is_handoff(rec) else KIND_AGENT,
                "query": query,
                "answer": answer,
                "tool_calls": tuple(call_indexes.get(key, ())),
                "span_id": rec.span_id,
                "start_ns": rec.start_ns,
                "end_ns": rec.end_ns,
                "error": rec.error,
                "steps": tuple(build(by_id[c]) for c in children.get(key, ())),
            },
        )

    return tuple(build(by_id[key]) for key in children.get(None, ()))


def _is_handoff(rec: SpanRecord) -> bool:
    return rec.attributes.get(ROLE_ATTR) == ROLE_HANDOFF


def _step_key(owner: SpanRecord | None, dropped: set[str]) -> str | None:
    """The key of the step `owner` stands for (None: the turn's own agent). A hand-off
    record that labels a later step owns nothing itself (its work, if any, counts as
    the turn's own agent's)."""
    if owner is None or owner.span_id in dropped:
        return None
    return owner.span_id
