"""The data model shared by every stage after span normalization.

Two sides meet here: what the agent *did* (`Conversation` → `Turn` → `ToolCall`,
built by the collector from spans or loaded from a dataset) and what it *should*
have done (`ReferenceSet` → `Reference` → `ReferenceTurn` → `ExpectedTool`).
Scoring results (`ConversationResult` → `TurnResult`) are the third group; their
field names are the JSON contract of `tracepass evaluate --format json`.

Models are frozen so a conversation handed to the evaluator cannot be mutated
behind the collector's back (it may be re-evaluated on a later revision).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from tracepass.evaluator.construct import construct_unchecked as construct_unchecked
from tracepass.evaluator.cost_latency import Latency, TimelineSpan, Usage


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _is_none(value: object) -> bool:
    return value is None


def _is_empty(value: object) -> bool:
    return not value


# --------------------------------------------------------------------------- actual side


class ToolCall(_Frozen):
    """One tool invocation as observed. `arguments` is always a mapping; sources whose
    arguments could not be parsed keep the raw text under the key `"_raw"`."""

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    result: Any = None
    error: str | None = None
    call_id: str | None = None
    start_ns: int | None = None
    # Where `arguments` were read: "attribute" (the tool span's attributes), "span_event",
    # "log" (a GenAI event log record), "adapter", "model_request" (the tool-call request
    # of the model call that issued it); None when unknown (e.g. imported datasets).
    # Provenance for `tracepass inspect`, not part of the JSON contracts: not serialized.
    arguments_source: str | None = Field(default=None, exclude=True)
    # The agent that called the tool (multi-agent turns: the sub-agent or hand-off target
    # whose span the tool ran under); None when no span of the turn named one (then not
    # serialized: JSON outputs without agents are unchanged).
    agent: str | None = Field(default=None, exclude_if=_is_none)


class ToolDefinition(_Frozen):
    """A tool as declared to the model (or by the tool itself): its name and, when the
    instrumentation recorded one, the JSON Schema of its arguments."""

    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None


class AgentStep(_Frozen):
    """One agent's part of a turn in a multi-agent system: a sub-agent the turn's agent
    invoked (a nested agent span) or the agent a hand-off passed the task to.

    `query` is what the agent was asked and `answer` what it returned (its own span's,
    else its first model input / last model output); `tool_calls` are the indexes, in the
    turn's `tool_calls`, of the calls this agent made itself (its sub-agents' calls are in
    their own `steps`).
    """

    agent: str | None = None
    kind: str = "agent"  # "agent" (a nested agent run) | "handoff" (a hand-off target)
    query: str | None = None
    answer: str | None = None
    tool_calls: tuple[int, ...] = ()
    span_id: str | None = None
    start_ns: int | None = None
    end_ns: int | None = None
    error: str | None = None
    steps: tuple[AgentStep, ...] = ()


class Turn(_Frozen):
    """One user query and the agent's work on it (tool calls in start-time order).

    `offered_tools`: the tools the model was offered during the turn, learned from the
    model-call spans; None when no span said (then "was this tool offered?" cannot be
    asked). `tool_schemas`: argument schemas the tool spans themselves recorded
    (tracepass's `@tool`), by tool name; they say a tool exists, not that it was offered.
    """

    query: str | None = None
    answer: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    final_answer_uses_tools: bool | None = None
    error: str | None = None
    trace_id: str | None = None
    span_id: str | None = None
    start_ns: int | None = None
    end_ns: int | None = None
    offered_tools: tuple[ToolDefinition, ...] | None = None
    tool_schemas: dict[str, dict[str, Any]] = Field(default_factory=dict)
    # The turn's spans for the timeline, and its tokens, cost and latency (cost_latency.py).
    spans: tuple[TimelineSpan, ...] = ()
    usage: Usage | None = None
    latency: Latency | None = None
    # Multi-agent turns: the agents that ran below the turn's own agent, nested as their
    # spans were (empty for a single agent, and then not serialized).
    steps: tuple[AgentStep, ...] = Field(default=(), exclude_if=_is_empty)


class Conversation(_Frozen):
    """A whole conversation: many turns, possibly spread over many traces."""

    id: str
    agent_name: str | None = None
    agent_version: str | None = None
    turns: tuple[Turn, ...] = ()
    reference_id: str | None = None
    trace_ids: tuple[str, ...] = ()
    # False when the collector had to give up waiting (eviction); such conversations are
    # scored with outcome "incomplete" rather than pass/fail.
    complete: bool = True
    attributes: dict[str, Any] = Field(default_factory=dict)
    # Over every turn's spans (cost_latency.py): tokens, cost, wall latency.
    usage: Usage | None = None
    latency: Latency | None = None


# --------------------------------------------------------------------------- reference side


class ExpectedTool(_Frozen):
    """A tool call the reference expects. `arguments=None` means arguments are not checked.

    `argument_match` is one of exact | ignore | subset | superset | regex | numeric, or a
    dotted import path `package.module:function` / `package.module.function` to a callable
    `(expected: dict, actual: dict) -> float | bool`.
    """

    name: str
    arguments: dict[str, Any] | None = None
    argument_match: str = "exact"
    abs_tol: float = 0.0
    rel_tol: float = 1e-9
    # Multi-agent: the agent expected to make the call (checked when given; not
    # serialized when absent).
    agent: str | None = Field(default=None, exclude_if=_is_none)


class GraderSpec(BaseModel):
    """One answer grader. Options specific to the grader type are extra fields, validated
    by the grader itself (see `tracepass.evaluator.graders`)."""

    model_config = ConfigDict(frozen=True, extra="allow")

    type: str
    weight: float = Field(default=1.0, gt=0)


class ReferenceTurn(_Frozen):
    query: str
    expected_answer: str | None = None
    graders: tuple[GraderSpec, ...] = ()
    # None: tools are not checked for this turn; (): the turn must not call tools.
    expected_tools: tuple[ExpectedTool, ...] | None = None
    tool_sequence_matters: bool = False


class MatchSpec(_Frozen):
    query: str | None = None
    aliases: tuple[str, ...] = ()


# What a simulated user says to end the conversation (docs/probe.md, "Simulated users").
STOP_MARKER = "###STOP###"
MAX_SIMULATED_TURNS = 50


class UserScenario(_Frozen):
    """A simulated user (`tracepass probe --user-simulator`): who they are and what they
    want. `must_say` / `must_not_say` are the deterministic audit of the simulator: a
    trial whose user left out a `must_say` phrase or said a `must_not_say` one strayed
    from its instructions (`simulator_fault`, not the agent's failure)."""

    instructions: str
    persona: str | None = None
    max_turns: int = Field(default=10, ge=1, le=MAX_SIMULATED_TURNS)
    must_say: tuple[str, ...] = ()
    must_not_say: tuple[str, ...] = ()


class Reference(_Frozen):
    id: str
    turns: tuple[ReferenceTurn, ...]
    match: MatchSpec = MatchSpec()
    tags: tuple[str, ...] = ()
    # A simulated user plays this reference: its one turn is checked against the whole
    # conversation (every tool call, the last answer); the turn's query opens it.
    user: UserScenario | None = Field(default=None, exclude_if=_is_none)


class PolicyTool(_Frozen):
    """A tool a policy declares: the agent may call it, with arguments valid against
    `arguments_schema` (None: arguments not checked)."""

    name: str
    arguments_schema: dict[str, Any] | None = None


RULE_TYPES = ("order", "forbidden_tool", "max_tool_calls", "requires_tool", "repeated_call")


class PolicyRule(_Frozen):
    """One rule of an agent policy; which fields apply depends on `type` (checked by the
    reference loader, docs/references.md):

    * order: a call of `then` needs an earlier call of `first` in the conversation;
    * forbidden_tool: `name` is never called;
    * max_tool_calls: at most `per_turn` calls in a turn / `per_conversation` in all;
    * requires_tool: a turn whose query matches `when_query_matches` (a regex, case
      insensitive) calls `name`;
    * repeated_call: overrides the learned check's `limit` (identical calls per turn).
    """

    type: str
    first: str | None = None
    then: str | None = None
    name: str | None = None
    per_turn: int | None = None
    per_conversation: int | None = None
    when_query_matches: str | None = None
    limit: int | None = None


class JudgeAppliesTo(_Frozen):
    """Which conversations a conversation judge sees: fnmatch globs (case-sensitive); a
    field left out matches anything. `reference_set` is matched against the scored
    result's set name (a reference set, `policy:<id>`), or "" when it has none."""

    agent_name: str | None = None
    agent_version: str | None = None
    reference_set: str | None = None
    # The scored result's reference id ("" without one): a judge of one task's
    # assertions (`references import --from tau2` writes these).
    reference_id: str | None = None


class ConversationJudgeSpec(_Frozen):
    """One conversation judge (docs/judges.md): an LLM judge that reads the whole
    conversation and scores it by `rubric` — a built-in template name
    (`goal_completion`, `tool_use`, `user_frustration`, `handoff`) or the rubric's own
    text. Its verdicts are trials of the series `reference_set="judge:<name>"`."""

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")
    rubric: str = Field(min_length=1)
    applies_to: JudgeAppliesTo = JudgeAppliesTo()
    pass_threshold: float = Field(default=0.7, ge=0.0, le=1.0)
    # Estimated prompt tokens (rubric + conversation) the judge may send; the rendered
    # conversation is cut from the middle out to fit (docs/judges.md, "Truncation").
    max_prompt_tokens: int = Field(default=16_000, ge=256)


class Policy(_Frozen):
    """What an agent must always do, checked without a reference answer. Applies to
    conversations whose agent name matches the glob `agent` (and version the glob
    `version`, when given)."""

    id: str
    agent: str
    version: str | None = None
    # None: the declared tools are learned from the spans.
    tools: tuple[PolicyTool, ...] | None = None
    rules: tuple[PolicyRule, ...] = ()
    graders: tuple[GraderSpec, ...] = ()
    # Conversation judges for this policy's conversations (besides the collector's own;
    # one with the same name replaces the collector's for them).
    conversation_judges: tuple[ConversationJudgeSpec, ...] = ()


class ReferenceSet(_Frozen):
    name: str
    version: str = "1"
    references: tuple[Reference, ...] = ()
    policies: tuple[Policy, ...] = ()


# --------------------------------------------------------------------------- results


class Outcome(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    ERROR = "error"  # an answer grader / judge could not produce a verdict
    INCOMPLETE = "incomplete"  # fewer turns than the reference, or evicted before completion
    # No reference to score against (reference-free evaluation): neither pass nor fail.
    UNSCORED = "unscored"
    # A turn needed the LLM judge when its budget was spent: no trial, neither pass nor fail.
    SKIPPED_BUDGET = "skipped_budget"


class ToolCorrectness(_Frozen):
    selection: float
    parameters: float
    sequence: float
    utilization: float
    overall: float
    correct: bool


class TrajectoryScores(_Frozen):
    exact: bool
    in_order: bool
    any_order: bool
    precision: float
    recall: float
    f1: float


class Violation(_Frozen):
    """One broken rule or failed check. `rule` is a bounded vocabulary (a metric label):
    the learned checks (unknown_tool, arguments_schema, unrecovered_tool_error,
    repeated_call), the policy rule types, and `grader` for a failed policy grader.
    `tool_call` indexes the turn's tool calls (None: the turn as a whole)."""

    rule: str
    turn: int
    tool_call: int | None
    message: str
    # arguments_schema: where in the arguments the schema failed (a JSON path).
    path: str | None = None


class GraderResult(_Frozen):
    grader: str
    score: float | None
    passed: bool | None
    error: str | None = None
    reasoning: str | None = None


class TurnResult(_Frozen):
    index: int
    query: str | None
    answer: str | None
    expected_answer: str | None = None
    answer_score: float | None
    answer_correct: bool | None
    answer_error: str | None = None
    graders: tuple[GraderResult, ...] = ()
    tool_correctness: ToolCorrectness | None
    # None when the turn's tools are not checked (no reference turn, or expected_tools None).
    trajectory: TrajectoryScores | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    expected_tools: tuple[ExpectedTool, ...] | None = None
    correct: bool | None
    # A custom argument matcher raised or returned garbage: the turn cannot be judged and
    # the conversation's outcome is ERROR (never a silent 0).
    tool_error: str | None = None
    # Vertex AI's trajectory_single_tool_use, for the tool names listed in
    # EvaluationConfig.single_tool_use: name → whether the turn called it. None when no
    # names are configured (the metric needs a name, so it is opt-in).
    single_tool_use: dict[str, bool] | None = None
    # Learned checks and, under a policy, its rules and graders (docs/metrics.md).
    violations: tuple[Violation, ...] = ()
    # None: no policy applies; else whether the turn passed every check and grader.
    policy_passed: bool | None = None
    policy_graders: tuple[GraderResult, ...] = ()
    # A policy grader could not decide (judge down, …): no verdict, never a fail.
    policy_error: str | None = None


class Judgement(_Frozen):
    """A conversation judge's verdict on one conversation. `outcome` is pass / fail, or
    `error` (no verdict: `error` says why) or `skipped_budget` (the judge budget was
    spent); `score` and `passed` are None unless the judge gave a verdict."""

    name: str
    outcome: Outcome
    score: float | None = None
    passed: bool | None = None
    reasoning: str | None = None
    error: str | None = None
    rubric_version: str
    model: str | None = None
    # The rendered conversation was cut from the middle to fit the token budget.
    truncated: bool = False


class ConversationResult(_Frozen):
    conversation_id: str
    reference_id: str | None
    reference_set: str | None = None
    agent_name: str | None = None
    agent_version: str | None = None
    correct: bool
    outcome: Outcome
    turns: tuple[TurnResult, ...] = ()
    trajectory: TrajectoryScores | None = None  # over the concatenated turns
    single_tool_use: dict[str, bool] | None = None  # over the concatenated turns
    policy_id: str | None = None
    # The verdict of the policy alone (the outcome combines it with the reference's).
    policy_outcome: Outcome | None = None
    violations: tuple[Violation, ...] = ()  # every turn's, in turn order
    # Conversation judges' verdicts (docs/judges.md), in configuration order.
    judgements: tuple[Judgement, ...] = ()
