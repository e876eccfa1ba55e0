"""The scoring entry point: one conversation + its reference → `ConversationResult`.

Called by the collector for every rebuilt conversation and by `tracepass evaluate`, so
it is a hot path: the expected side of each reference is compiled once per Evaluator
(graders resolved, matchers, name indexes and counts, whether grading can run without an
event loop), deterministic graders run as plain calls (no coroutine, no event loop),
the tool pairing also yields the trajectory's matched count, and results are built
without re-validating values that come from validated models.

Rules (docs/metrics.md has the full table):

* turns pair with reference turns by position;
* turn correct ⇔ the answer is correct (or not graded) AND tool correctness is None or
  correct — in both profiles (Fair Forge's code ignores tool correctness here, its
  paper does not);
* outcome ERROR if any grader or argument matcher failed (never a silent 0), else
  INCOMPLETE if the conversation has fewer turns than the reference or was not
  complete, else PASS if every turn is correct and the turn counts match, else FAIL;
* no reference → every turn unscored and outcome UNSCORED (INCOMPLETE if not complete);
* the learned checks (`learned_checks.py`) run on every conversation and their violations are
  reported per turn; they decide nothing on their own;
* conversation judges (`conversation_judges.py`, docs/judges.md), when configured, read
  the whole scored conversation and add their verdicts (`judgements`); they change
  neither the outcome nor the result's series (each is a series of its own);
* an agent policy (`agent_policies.py`), when one applies, adds its rules and graders to the
  learned checks: a turn is correct only if it also passes the policy, and the outcome
  is the worse of the reference's and the policy's (no verdict > INCOMPLETE > FAIL >
  PASS). Without a reference the policy's verdict is the outcome and the result is
  labelled reference_set="policy:<id>".
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tracepass.evaluator.graders import NeedsEventLoop
from tracepass.evaluator.judge.call_budget import JudgeBudgetExhausted
from tracepass.evaluator.judge.conversation_judges import CompiledJudge, ConversationJudges
from tracepass.evaluator.models import (
    Conversation,
    ConversationJudgeSpec,
    ConversationResult,
    Outcome,
    Policy,
    Reference,
    ReferenceTurn,
    ToolCorrectness,
    TrajectoryScores,
    Turn,
    TurnResult,
    Violation,
    construct_unchecked,
)
from tracepass.evaluator.schema_guard import LeaveTheLoop, inline_attempt
from tracepass.evaluator.scoring.agent_policies import CompiledPolicy, policy_reference_set
from tracepass.evaluator.scoring.answers import TurnAnswer, TurnGrading
from tracepass.evaluator.scoring.argmatch import ArgumentMatchError
from tracepass.evaluator.scoring.fairforge_profile import (
    fair_forge_matcher,
    fair_forge_tool_correctness,
)
from tracepass.evaluator.scoring.learned_checks import (
    DEFAULT_REPEATED_CALL_LIMIT,
    learned_violations,
    needs_schema_validation,
)
from tracepass.evaluator.scoring.simulated_turns import scored_turns
from tracepass.evaluator.scoring.tool_correctness import (
    CompiledTurn,
    called_names,
    compile_turn,
    normalize_weights,
    score_turn,
)
from tracepass.evaluator.scoring.trajectory import (
    conversation_trajectory,
    matched_names,
    name_trajectory,
    trajectory_scores,
)
from tracepass.evaluator.vocabulary import (
    DEFAULT_GRADER,
    PROFILE_DEFAULT,
    PROFILE_FAIR_FORGE,
    Profile,
)

if TYPE_CHECKING:
    from tracepass.evaluator.judge.llm_judge import LLMJudge

__all__ = ["EvaluationConfig", "Evaluator", "PendingEvaluation", "ToolWeights"]

# What `_grade` returns when the judge budget is spent (compared by identity).
_BUDGET_SPENT = TurnAnswer(None, None, "judge budget spent", ())


class ToolWeights(BaseModel):
    """Weights of the four tool-correctness dimensions: non-negative, not all zero;
    normalized to sum 1 in the default profile (used as given in `fair-forge`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    selection: float = 0.25
    parameters: float = 0.25
    sequence: float = 0.25
    utilization: float = 0.25

    @model_validator(mode="after")
    def _check(self) -> ToolWeights:
        normalize_weights(self.selection, self.parameters, self.sequence, self.utilization)
        return self

    def raw(self) -> tuple[float, float, float, float]:
        return (self.selection, self.parameters, self.sequence, self.utilization)

    def normalized(self) -> tuple[float, float, float, float]:
        return normalize_weights(*self.raw())


class EvaluationConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    profile: Profile = PROFILE_DEFAULT
    threshold: float = Field(default=0.7, ge=0.0, le=1.0)
    tool_threshold: float = Field(default=1.0, ge=0.0, le=1.0)
    weights: ToolWeights = Field(default_factory=ToolWeights)
    default_grader: str = DEFAULT_GRADER
    trajectory_match: Literal["name", "name_and_arguments"] = "name"
    utilization: Literal["auto", "declared", "detected"] = "auto"
    # Tool names for the single-tool-use trajectory metric (did the turn / conversation
    # call this tool at all?); empty: the metric is not computed.
    single_tool_use: tuple[str, ...] = ()
    # Learned check `repeated_call`: identical calls allowed per turn (a policy's
    # `repeated_call` rule overrides it).
    repeated_call_limit: int = Field(default=DEFAULT_REPEATED_CALL_LIMIT, ge=1)


@dataclass(frozen=True, slots=True)
class _CompiledTurn:
    rt: ReferenceTurn
    grading: TurnGrading
    tools: CompiledTurn | None  # None: the turn's tools are not checked
    names: list[str]  # expected tool names, in order
    counts: dict[str, int]  # expected tool name → how many times


@dataclass(frozen=True, slots=True)
class _CompiledReference:
    reference: Reference
    turns: tuple[_CompiledTurn, ...]
    # some grader awaits (llm / command / custom): grade inside an event loop
    needs_loop: bool
    any_checked: bool  # some turn checks tools: there is a conversation trajectory
    names: list[str]  # expected names over the checked turns, concatenated
    counts: dict[str, int]


def _counts(names: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for n in names:
        out[n] = out.get(n, 0) + 1
    return out


def _turn_result(
    i: int,
    turn: Turn,
    rt: ReferenceTurn | None,
    ans: TurnAnswer | None,
    tc: ToolCorrectness | None,
    traj: TrajectoryScores | None,
    correct: bool | None,
    tool_error: str | None,
) -> TurnResult:
    # every field of TurnResult, in one dict: see models.construct_unchecked
    return construct_unchecked(
        TurnResult,
        {
            "index": i,
            "query": turn.query,
            "answer": turn.answer,
            "expected_answer": None if rt is None else rt.expected_answer,
            "answer_score": None if ans is None else ans.score,
            "answer_correct": None if ans is None else ans.correct,
            "answer_error": None if ans is None else ans.error,
            "graders": () if ans is None else ans.graders,
            "tool_correctness": tc,
            "trajectory": traj,
            "tool_calls": turn.tool_calls,
            "expected_tools": None if rt is None else rt.expected_tools,
            "correct": correct,
            "tool_error": tool_error,
            "single_tool_use": None,
            "violations": (),
            "policy_passed": None,
            "policy_graders": (),
            "policy_error": None,
        },
    )


def _single_tool_use(names: tuple[str, ...], calls: Any) -> dict[str, bool] | None:
    if not names:
        return None
    called = {c.name for c in calls}
    return {name: name in called for name in names}


@dataclass(slots=True)
class _Tally:
    """What scoring the turns one by one gathers for the conversation-level verdict."""

    names: list[str] = field(default_factory=list)  # called tool names (name mode)
    matched: int = 0  # Σ per-turn matched counts (name mode)
    matched_known: bool = True  # False when a turn could not be matched
    error: bool = False
    all_correct: bool = True


def _grade_now(grading: TurnGrading, turn: Turn) -> TurnAnswer:
    """Grade a turn with plain calls (raises `NeedsEventLoop` if a grader awaits)."""
    tool_results = (
        tuple([c.result for c in turn.tool_calls if c.result is not None])
        if grading.uses_tool_results
        else ()
    )
    return grading.grade_sync(turn.query, turn.answer, tool_results)


def _outcome(*, error: bool, incomplete: bool, all_correct: bool) -> Outcome:
    if error:
        return Outcome.ERROR
    if incomplete:
        return Outcome.INCOMPLETE
    return Outcome.PASS if all_correct else Outcome.FAIL


# Which outcome wins when a reference and a policy both judge a conversation: no
# verdict (error, budget spent) over incomplete over fail over pass.
_SEVERITY = {
    Outcome.ERROR: 4,
    Outcome.SKIPPED_BUDGET: 3,
    Outcome.INCOMPLETE: 2,
    Outcome.FAIL: 1,
    Outcome.PASS: 0,
}


def _worse(a: Outcome, b: Outcome) -> Outcome:
    return a if _SEVERITY.get(a, 0) >= _SEVERITY.get(b, 0) else b


def _with_violations(
    result: ConversationResult, per_turn: list[list[Violation]]
) -> ConversationResult:
    """The learned checks' findings on a result they do not decide."""
    if not any(per_turn):
        return result
    turns = tuple(
        t.model_copy(update={"violations": tuple(v)}) if v else t
        for t, v in zip(result.turns, per_turn, strict=True)
    )
    flat = tuple(v for vs in per_turn for v in vs)
    return result.model_copy(update={"turns": turns, "violations": flat})


def _turn_has_error(t: TurnResult) -> bool:
    return t.answer_error is not None or t.tool_error is not None


def _with_policy(
    conversation: Conversation,
    result: ConversationResult,
    policy: CompiledPolicy,
    answers: list[TurnAnswer | None],
) -> ConversationResult:
    """`result` (the reference's verdict, or the reference-free one) judged by the
    policy too: per-turn violations and verdicts, and the combined outcome."""
    verdict = policy.verdict(conversation, answers)
    turns = []
    for i, t in enumerate(result.turns):
        passed = verdict.turn_passed(i)
        ans = answers[i]
        correct: bool | None
        if t.correct is False or passed is False:
            correct = False
        elif passed is None or _turn_has_error(t):
            correct = None
        else:
            correct = True
        turns.append(
            t.model_copy(
                update={
                    "violations": tuple(verdict.violations[i]),
                    "policy_passed": passed,
                    "policy_graders": () if ans is None else ans.graders,
                    "policy_error": None if ans is None else ans.error,
                    "correct": correct,
                }
            )
        )
    reference_set: str | None
    if result.reference_id is None:
        outcome = verdict.outcome
        reference_set = policy_reference_set(policy.policy)
    else:
        outcome = _worse(result.outcome, verdict.outcome)
        reference_set = result.reference_set
    return result.model_copy(
        update={
            "turns": tuple(turns),
            "violations": tuple(v for vs in verdict.violations for v in vs),
            "policy_id": policy.policy.id,
            "policy_outcome": verdict.outcome,
            "outcome": outcome,
            "correct": outcome is Outcome.PASS,
            "reference_set": reference_set,
        }
    )


@dataclass(frozen=True, slots=True)
class PendingEvaluation:
    """What is left to do inside an event loop: grade the reference (`cref`) and/or the
    policy's graders, then run the conversation judges. `base` is the reference result
    when it is already done; `finished` the whole result when only judges are left."""

    base: ConversationResult | None
    cref: _CompiledReference | None
    policy: CompiledPolicy | None
    finished: ConversationResult | None = None
    judges: tuple[CompiledJudge, ...] = ()


class Evaluator:
    """Scores conversations against references. Reusable and cheap to call; holds a
    small cache of compiled references keyed by identity."""

    _CACHE_LIMIT = 4096

    def __init__(
        self,
        config: EvaluationConfig | None = None,
        judge: LLMJudge | None = None,
        *,
        conversation_judges: Sequence[ConversationJudgeSpec] = (),
    ) -> None:
        """`conversation_judges`: judges of whole conversations (raises
        `ConversationJudgeError` for one that cannot be used)."""
        self.config = config if config is not None else EvaluationConfig()
        self.judge = judge
        self.conversation_judges = ConversationJudges(conversation_judges, judge)
        cfg = self.config
        self._fair_forge = cfg.profile == PROFILE_FAIR_FORGE
        self._weights = cfg.weights.raw() if self._fair_forge else cfg.weights.normalized()
        self._by_args = cfg.trajectory_match == "name_and_arguments"
        self._compiled: dict[int, _CompiledReference] = {}
        self._policies: dict[int, CompiledPolicy] = {}

    def _compile_policy(self, policy: Policy) -> CompiledPolicy:
        hit = self._policies.get(id(policy))
        if hit is not None and hit.policy is policy:
            return hit
        compiled = CompiledPolicy(
            policy,
            threshold=self.config.threshold,
            judge=self.judge,
            repeated_limit=self.config.repeated_call_limit,
        )
        if len(self._policies) >= self._CACHE_LIMIT:
            self._policies.clear()
        self._policies[id(policy)] = compiled
        return compiled

    # ------------------------------------------------------------------ compile

    def _compile_turn(self, rt: ReferenceTurn) -> _CompiledTurn:
        cfg = self.config
        names = [t.name for t in rt.expected_tools or ()]
        return _CompiledTurn(
            rt=rt,
            grading=TurnGrading(
                rt, threshold=cfg.threshold, default_grader=cfg.default_grader, judge=self.judge
            ),
            # The fair-forge profile pairs calls by its own parameter credit; only the
            # expected side of `tools` is read otherwise in that profile.
            tools=compile_turn(rt, fair_forge_matcher if self._fair_forge else None),
            names=names,
            counts=_counts(names),
        )

    def _compile(self, reference: Reference) -> _CompiledReference:
        hit = self._compiled.get(id(reference))
        if hit is not None and hit.reference is reference:
            return hit
        turns = tuple(self._compile_turn(t) for t in reference.turns)
        names = [n for t in turns if t.tools is not None for n in t.names]
        compiled = _CompiledReference(
            reference=reference,
            turns=turns,
            needs_loop=any(t.grading.needs_loop for t in turns),
            any_checked=any(t.tools is not None for t in turns),
            names=names,
            counts=_counts(names),
        )
        if len(self._compiled) >= self._CACHE_LIMIT:
            self._compiled.clear()
        self._compiled[id(reference)] = compiled
        return compiled

    # ------------------------------------------------------------------ scoring

    def _reference_free(
        self, conversation: Conversation, reference_set: str | None
    ) -> ConversationResult:
        outcome = Outcome.UNSCORED if conversation.complete else Outcome.INCOMPLETE
        return self._unjudged(conversation, reference_set, outcome, None)

    def _unjudged(
        self,
        conversation: Conversation,
        reference_set: str | None,
        outcome: Outcome,
        reference_id: str | None,
    ) -> ConversationResult:
        """A result with no scores: no reference, or the judge budget was spent."""
        turns = tuple(
            _turn_result(i, t, None, None, None, None, None, None)
            for i, t in enumerate(conversation.turns)
        )
        return construct_unchecked(
            ConversationResult,
            {
                "conversation_id": conversation.id,
                "reference_id": reference_id,
                "reference_set": reference_set,
                "agent_name": conversation.agent_name,
                "agent_version": conversation.agent_version,
                "correct": False,
                "outcome": outcome,
                "turns": turns,
                "trajectory": None,
                "single_tool_use": None,
                "policy_id": None,
                "policy_outcome": None,
                "violations": (),
                "judgements": (),
            },
        )

    def _score(
        self,
        conversation: Conversation,
        cref: _CompiledReference,
        reference_set: str | None,
        answers: list[TurnAnswer] | None,
    ) -> ConversationResult:
        """Score with answers already graded, or (`answers` None) grading each turn on
        the spot with `grade_sync` — which raises `NeedsEventLoop` if a grader awaits."""
        turns = scored_turns(conversation, cref.reference)
        cturns = cref.turns
        n_ref = len(cturns)
        tally = _Tally()
        results: list[TurnResult] = []
        for i, turn in enumerate(turns):
            if i >= n_ref:  # more turns than the reference: reported, not scored
                results.append(_turn_result(i, turn, None, None, None, None, None, None))
                continue
            ct = cturns[i]
            ans = answers[i] if answers is not None else _grade_now(ct.grading, turn)
            results.append(self._score_turn(i, turn, ct, ans, tally))
        conv_traj = self._conversation_trajectory(turns, cref, tally) if cref.any_checked else None
        outcome = _outcome(
            error=tally.error,
            incomplete=len(turns) < n_ref or not conversation.complete,
            all_correct=tally.all_correct and len(turns) == n_ref,
        )
        return construct_unchecked(
            ConversationResult,
            {
                "conversation_id": conversation.id,
                "reference_id": cref.reference.id,
                "reference_set": reference_set,
                "agent_name": conversation.agent_name,
                "agent_version": conversation.agent_version,
                "correct": outcome is Outcome.PASS,
                "outcome": outcome,
                "turns": tuple(results),
                "trajectory": conv_traj,
                "single_tool_use": _single_tool_use(
                    self.config.single_tool_use, [c for t in turns for c in t.tool_calls]
                ),
                "policy_id": None,
                "policy_outcome": None,
                "violations": (),
                "judgements": (),
            },
        )

    def _score_turn(
        self, i: int, turn: Turn, ct: _CompiledTurn, ans: TurnAnswer, tally: _Tally
    ) -> TurnResult:
        """One paired turn: its tools (when the reference checks them) and its verdict."""
        calls = turn.tool_calls
        tc: ToolCorrectness | None = None
        traj: TrajectoryScores | None = None
        tool_error: str | None = None
        if ct.tools is not None:
            try:
                tc, traj = self._score_tools(turn, ct, ct.tools, tally)
            except ArgumentMatchError as exc:
                tool_error = str(exc)
                tally.matched_known = False  # unknown: count the conversation in full
        correct: bool | None
        if ans.error is not None or tool_error is not None:
            tally.error = True
            correct = None
        else:
            answer_ok = True if ans.correct is None else ans.correct
            correct = answer_ok and (tc is None or tc.correct)
        if not correct:
            tally.all_correct = False
        rt = ct.rt
        # every field of TurnResult, in one dict: see models.construct_unchecked
        return construct_unchecked(
            TurnResult,
            {
                "index": i,
                "query": turn.query,
                "answer": turn.answer,
                "expected_answer": rt.expected_answer,
                "answer_score": ans.score,
                "answer_correct": ans.correct,
                "answer_error": ans.error,
                "graders": ans.graders,
                "tool_correctness": tc,
                "trajectory": traj,
                "tool_calls": calls,
                "expected_tools": rt.expected_tools,
                "correct": correct,
                "tool_error": tool_error,
                "single_tool_use": _single_tool_use(self.config.single_tool_use, calls),
                "violations": (),
                "policy_passed": None,
                "policy_graders": (),
                "policy_error": None,
            },
        )

    def _score_tools(
        self, turn: Turn, ct: _CompiledTurn, compiled: CompiledTurn, tally: _Tally
    ) -> tuple[ToolCorrectness | None, TrajectoryScores]:
        """Tool correctness and trajectory of one turn; raises `ArgumentMatchError`."""
        cfg = self.config
        calls = turn.tool_calls
        # As the reference spells them (plugin-qualified names resolved, toolcorrectness).
        names = None if self._by_args else called_names(calls, compiled)
        if names is not None:
            tally.names.extend(names)
        matched = -1  # unknown until counted
        if self._fair_forge:
            tc = fair_forge_tool_correctness(
                calls,
                ct.rt,
                declared=turn.final_answer_uses_tools,
                weights=self._weights,
                tool_threshold=cfg.tool_threshold,
                compiled=compiled,
                names=names,
            )
        else:
            tc, matched = score_turn(
                calls,
                compiled,
                turn.answer,
                turn.final_answer_uses_tools,
                self._weights,
                cfg.tool_threshold,
                cfg.utilization,
                names,
            )
        if names is None:
            return tc, trajectory_scores(calls, compiled.expected, match="name_and_arguments")
        if matched < 0:
            matched = matched_names(names, ct.counts)
        tally.matched += matched
        return tc, name_trajectory(names, ct.names, matched)

    def _conversation_trajectory(
        self, turns: Sequence[Turn], cref: _CompiledReference, tally: _Tally
    ) -> TrajectoryScores | None:
        if self._by_args:
            try:
                return conversation_trajectory(turns, cref.reference, match="name_and_arguments")
            except ArgumentMatchError:
                tally.error = True
                return None
        # Matching across the concatenation finds at least the per-turn matches and at
        # most min(n_p, n_r); when those bounds meet no recount is needed.
        bound = min(len(tally.names), len(cref.names))
        if tally.matched_known and tally.matched == bound:
            conv_matched = bound
        else:
            conv_matched = matched_names(tally.names, cref.counts)
        return name_trajectory(tally.names, cref.names, conv_matched)

    async def _grade(
        self, grading: TurnGrading, query: str | None, answer: str | None, results: tuple[Any, ...]
    ) -> TurnAnswer:
        try:
            return await grading.grade(query, answer, results)
        except asyncio.CancelledError:
            raise
        except JudgeBudgetExhausted:
            return _BUDGET_SPENT
        except Exception as exc:  # grading reports errors itself; this is a backstop
            return TurnAnswer(None, None, f"{type(exc).__name__}: {exc}", ())

    def _finish(
        self,
        conversation: Conversation,
        result: ConversationResult,
        policy: CompiledPolicy | None,
        answers: list[TurnAnswer | None] | None,
    ) -> ConversationResult:
        if policy is None or answers is None:
            return _with_violations(
                result,
                learned_violations(conversation, repeated_limit=self.config.repeated_call_limit),
            )
        if any(a is _BUDGET_SPENT for a in answers):
            # The policy's judge could not run: no policy verdict, as for a reference.
            spent = self._unjudged(
                conversation,
                result.reference_set if result.reference_id is not None else None,
                Outcome.SKIPPED_BUDGET,
                result.reference_id,
            )
            return spent.model_copy(
                update={
                    "policy_id": policy.policy.id,
                    "policy_outcome": Outcome.SKIPPED_BUDGET,
                    "reference_set": result.reference_set
                    if result.reference_id is not None
                    else policy_reference_set(policy.policy),
                }
            )
        return _with_policy(conversation, result, policy, answers)

    async def _grade_policy(
        self, policy: CompiledPolicy, conversation: Conversation
    ) -> list[TurnAnswer | None]:
        try:
            return await policy.grade(conversation)
        except JudgeBudgetExhausted:
            return [_BUDGET_SPENT] * len(conversation.turns)

    def _evaluate_without_loop(
        self,
        conversation: Conversation,
        reference: Reference | None,
        reference_set: str | None,
        policy: Policy | None = None,
    ) -> ConversationResult | PendingEvaluation:
        """What both entry points try first, with plain calls: the whole result when
        every grader (the reference's and the policy's) is loop-free. Otherwise what is
        left to grade on an event loop."""
        cpol = self._compile_policy(policy) if policy is not None else None
        base: ConversationResult | None = None
        cref: _CompiledReference | None = None
        if reference is None:
            base = self._reference_free(conversation, reference_set)
        else:
            cref = self._compile(reference)
            if not cref.needs_loop:
                # try/except, not contextlib.suppress: no context object on the hot path
                try:
                    base = self._score(conversation, cref, reference_set, None)
                except NeedsEventLoop:
                    base = None  # a custom grader promised not to await, and did
        if base is None or (cpol is not None and cpol.needs_loop):
            return PendingEvaluation(base, cref, cpol)
        answers: list[TurnAnswer | None] | None = None
        if cpol is not None:
            try:
                answers = cpol.grade_sync(conversation)
            except NeedsEventLoop:
                return PendingEvaluation(base, cref, cpol)
        finished = self._finish(conversation, base, cpol, answers)
        judges = self._judges_for(conversation, finished, policy)
        if judges:
            return PendingEvaluation(None, None, None, finished=finished, judges=judges)
        return finished

    def _judges_for(
        self, conversation: Conversation, result: ConversationResult, policy: Policy | None
    ) -> tuple[CompiledJudge, ...]:
        """The conversation judges that read this scored conversation (usually none: one
        attribute test when no judge is configured and no policy has any)."""
        if not self.conversation_judges and (policy is None or not policy.conversation_judges):
            return ()
        return self.conversation_judges.select(
            conversation, result.reference_set, policy, result.reference_id
        )

    async def _judged(
        self,
        conversation: Conversation,
        result: ConversationResult,
        judges: tuple[CompiledJudge, ...],
    ) -> ConversationResult:
        if not judges:
            return result
        judgements = await self.conversation_judges.run(conversation, judges)
        return result.model_copy(update={"judgements": judgements})

    async def _score_on_loop(
        self, conversation: Conversation, cref: _CompiledReference, reference_set: str | None
    ) -> ConversationResult:
        turns = scored_turns(conversation, cref.reference)
        paired = min(len(turns), len(cref.turns))
        pending = [
            self._grade(
                cref.turns[i].grading,
                turns[i].query,
                turns[i].answer,
                tuple([c.result for c in turns[i].tool_calls if c.result is not None]),
            )
            for i in range(paired)
        ]
        if cref.needs_loop and paired > 1:
            answers = list(await asyncio.gather(*pending))
        else:
            answers = [await p for p in pending]
        if any(a is _BUDGET_SPENT for a in answers):
            return self._unjudged(
                conversation, reference_set, Outcome.SKIPPED_BUDGET, cref.reference.id
            )
        return self._score(conversation, cref, reference_set, answers)

    async def aevaluate(
        self,
        conversation: Conversation,
        reference: Reference | None,
        *,
        reference_set: str | None = None,
        policy: Policy | None = None,
    ) -> ConversationResult:
        if needs_schema_validation(conversation):
            # Schemas declared by spans cost what their sender chooses: the loop gives
            # them schema_guard.INLINE_BUDGET_S, then a worker thread the full time limit.
            try:
                with inline_attempt():
                    done = self._evaluate_without_loop(
                        conversation, reference, reference_set, policy
                    )
            except LeaveTheLoop:
                done = await asyncio.to_thread(
                    self._evaluate_without_loop, conversation, reference, reference_set, policy
                )
        else:
            done = self._evaluate_without_loop(conversation, reference, reference_set, policy)
        if isinstance(done, ConversationResult):
            return done
        return await self.complete(conversation, done, reference_set=reference_set)

    def try_evaluate(
        self,
        conversation: Conversation,
        reference: Reference | None,
        *,
        reference_set: str | None = None,
        policy: Policy | None = None,
    ) -> ConversationResult | PendingEvaluation:
        """`aevaluate`'s first half, with plain calls: the result when every grader
        involved is loop-free, else what is left, for `complete` on an event loop. Lets
        a batch (`evaluate_all`) score most conversations without a task each."""
        return self._evaluate_without_loop(conversation, reference, reference_set, policy)

    async def complete(
        self,
        conversation: Conversation,
        done: PendingEvaluation,
        *,
        reference_set: str | None = None,
    ) -> ConversationResult:
        """Finish what `try_evaluate` left (same arguments as that call)."""
        if done.finished is not None:
            return await self._judged(conversation, done.finished, done.judges)
        base = done.base
        policy = None if done.policy is None else done.policy.policy
        if base is None:
            assert done.cref is not None
            base = await self._score_on_loop(conversation, done.cref, reference_set)
            if base.outcome is Outcome.SKIPPED_BUDGET:
                return await self._judged(
                    conversation, base, self._judges_for(conversation, base, policy)
                )
        answers = (
            None if done.policy is None else await self._grade_policy(done.policy, conversation)
        )
        if needs_schema_validation(conversation):  # the learned checks: as in `aevaluate`
            try:
                with inline_attempt():
                    result = self._finish(conversation, base, done.policy, answers)
            except LeaveTheLoop:
                result = await asyncio.to_thread(
                    self._finish, conversation, base, done.policy, answers
                )
        else:
            result = self._finish(conversation, base, done.policy, answers)
        return await self._judged(
            conversation, result, self._judges_for(conversation, result, policy)
        )

    def evaluate(
        self,
        conversation: Conversation,
        reference: Reference | None,
        *,
        reference_set: str | None = None,
        policy: Policy | None = None,
    ) -> ConversationResult:
        """Synchronous wrapper. With loop-free graders only (exact, contains, regex, …)
        everything runs as plain calls — no coroutine, no event loop; otherwise
        `asyncio.run`. Inside a running loop use `aevaluate`."""
        done = self._evaluate_without_loop(conversation, reference, reference_set, policy)
        if isinstance(done, ConversationResult):
            return done
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.complete(conversation, done, reference_set=reference_set))
        raise RuntimeError(
            "Evaluator.evaluate() called inside a running event loop; await aevaluate() instead"
        )
