"""Agent policies: reference-free rules and graders applied to every conversation of an
agent (docs/references.md, "Policies"; docs/metrics.md for the verdicts).

A policy's verdict on a conversation is `pass` when every turn passes every learned
check, every rule and every grader; `fail` when something is violated; `error` when a
grader could not decide; `incomplete` when the conversation was evicted unfinished.
Each violation is kept with its rule, turn and tool call.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

from tracepass.evaluator.models import (
    Conversation,
    Outcome,
    Policy,
    PolicyRule,
    PolicyTool,
    ReferenceTurn,
    ToolCall,
    Violation,
)
from tracepass.evaluator.scoring.answers import TurnAnswer, TurnGrading
from tracepass.evaluator.scoring.learned_checks import (
    DEFAULT_REPEATED_CALL_LIMIT,
    learned_violations,
)

if TYPE_CHECKING:
    from tracepass.evaluator.judge.llm_judge import LLMJudge

__all__ = [
    "POLICY_SET_PREFIX",
    "CompiledPolicy",
    "PolicyVerdict",
    "find_policy",
    "policy_reference_set",
]

# Results scored by a policy alone are labelled reference_set="policy:<id>".
POLICY_SET_PREFIX = "policy:"


def policy_reference_set(policy: Policy) -> str:
    return POLICY_SET_PREFIX + policy.id


def find_policy(
    policies: Iterable[Policy], agent_name: str | None, agent_version: str | None
) -> Policy | None:
    """The first policy (in load order) whose `agent` glob matches the agent name and,
    when it has one, whose `version` glob matches the version."""
    if agent_name is None:
        return None
    for policy in policies:
        if not fnmatchcase(agent_name, policy.agent):
            continue
        if policy.version is not None and (
            agent_version is None or not fnmatchcase(agent_version, policy.version)
        ):
            continue
        return policy
    return None


def _rule_violations(
    rules: Sequence[PolicyRule], conversation: Conversation
) -> list[list[Violation]]:
    per_turn: list[list[Violation]] = [[] for _ in conversation.turns]
    called: set[str] = set()
    total = 0
    for i, turn in enumerate(conversation.turns):
        out = per_turn[i]
        names = [c.name for c in turn.tool_calls]
        for rule in rules:
            kind = rule.type
            if kind == "requires_tool" and rule.when_query_matches is not None:
                if (
                    re.search(rule.when_query_matches, turn.query or "", re.IGNORECASE)
                    and rule.name not in names
                ):
                    out.append(
                        Violation(
                            rule=kind,
                            turn=i,
                            tool_call=None,
                            message=(
                                f"the query matches {rule.when_query_matches!r} but "
                                f"{rule.name} was not called"
                            ),
                        )
                    )
            elif (
                kind == "max_tool_calls"
                and rule.per_turn is not None
                and len(names) > rule.per_turn
            ):
                out.append(
                    Violation(
                        rule=kind,
                        turn=i,
                        tool_call=rule.per_turn,
                        message=f"{len(names)} tool calls in the turn (at most {rule.per_turn})",
                    )
                )
        for k, name in enumerate(names):
            total += 1
            for rule in rules:
                kind = rule.type
                if kind == "forbidden_tool" and name == rule.name:
                    out.append(
                        Violation(rule=kind, turn=i, tool_call=k, message=f"{name} is forbidden")
                    )
                elif kind == "order" and name == rule.then and rule.first not in called:
                    out.append(
                        Violation(
                            rule=kind,
                            turn=i,
                            tool_call=k,
                            message=f"{name} called before any {rule.first}",
                        )
                    )
                elif (
                    kind == "max_tool_calls"
                    and rule.per_conversation is not None
                    and total == rule.per_conversation + 1
                ):
                    out.append(
                        Violation(
                            rule=kind,
                            turn=i,
                            tool_call=k,
                            message=(
                                f"more than {rule.per_conversation} tool calls in the conversation"
                            ),
                        )
                    )
            called.add(name)
    return per_turn


@dataclass(frozen=True, slots=True)
class PolicyVerdict:
    """A policy applied to one conversation: per-turn violations and grader answers."""

    violations: list[list[Violation]]
    answers: list[TurnAnswer | None]  # None: the policy has no graders
    outcome: Outcome

    def turn_passed(self, i: int) -> bool | None:
        ans = self.answers[i]
        if ans is not None and ans.error is not None:
            return None
        return not self.violations[i] and (ans is None or ans.correct is not False)


class CompiledPolicy:
    """A policy resolved once: declared tools by name, the grading plan of its graders
    (the same machinery as reference turns, with no expected answer)."""

    def __init__(
        self,
        policy: Policy,
        *,
        threshold: float,
        judge: LLMJudge | None = None,
        repeated_limit: int = DEFAULT_REPEATED_CALL_LIMIT,
    ) -> None:
        self.policy = policy
        self.declared: dict[str, PolicyTool] | None = (
            None if policy.tools is None else {t.name: t for t in policy.tools}
        )
        for rule in policy.rules:
            if rule.type == "repeated_call" and rule.limit is not None:
                repeated_limit = rule.limit
        self.repeated_limit = repeated_limit
        self.grading: TurnGrading | None = (
            TurnGrading(
                ReferenceTurn(query="", graders=policy.graders), threshold=threshold, judge=judge
            )
            if policy.graders
            else None
        )
        self.needs_loop = self.grading is not None and self.grading.needs_loop

    def violations(self, conversation: Conversation) -> list[list[Violation]]:
        learned = learned_violations(
            conversation, declared=self.declared, repeated_limit=self.repeated_limit
        )
        rules = _rule_violations(self.policy.rules, conversation)
        return [a + b for a, b in zip(learned, rules, strict=True)]

    def verdict(
        self, conversation: Conversation, answers: list[TurnAnswer | None]
    ) -> PolicyVerdict:
        violations = self.violations(conversation)
        error = False
        for i, ans in enumerate(answers):
            if ans is None:
                continue
            if ans.error is not None:
                error = True
            elif ans.correct is False:
                failed = [g for g in ans.graders if g.passed is False] or list(ans.graders)
                for g in failed:
                    why = f": {g.reasoning}" if g.reasoning else ""
                    score = "no score" if g.score is None else f"score {g.score:.2f}"
                    violations[i].append(
                        Violation(
                            rule="grader",
                            turn=i,
                            tool_call=None,
                            message=f"{g.grader} {score}{why}",
                        )
                    )
        if error:
            outcome = Outcome.ERROR
        elif not conversation.complete:
            outcome = Outcome.INCOMPLETE
        elif any(violations):
            outcome = Outcome.FAIL
        else:
            outcome = Outcome.PASS
        return PolicyVerdict(violations, answers, outcome)

    def grade_sync(self, conversation: Conversation) -> list[TurnAnswer | None]:
        grading = self.grading
        if grading is None:
            return [None] * len(conversation.turns)
        return [
            grading.grade_sync(t.query, t.answer, _results(t.tool_calls))
            for t in conversation.turns
        ]

    async def grade(self, conversation: Conversation) -> list[TurnAnswer | None]:
        """Every turn's answer by the policy's graders; turns concurrently when a grader
        waits on I/O (the judge), as reference turns are."""
        grading = self.grading
        if grading is None:
            return [None] * len(conversation.turns)
        pending = [
            grading.grade(t.query, t.answer, _results(t.tool_calls)) for t in conversation.turns
        ]
        if grading.needs_loop and len(pending) > 1:
            return list(await asyncio.gather(*pending))
        return [await p for p in pending]


def _results(calls: Iterable[ToolCall]) -> tuple[Any, ...]:
    return tuple([c.result for c in calls if c.result is not None])
