"""How an evaluation outcome counts: as evidence of success, failure, or neither. Shared by
the metrics and the evaluation events so both label a result the same way."""

from __future__ import annotations

from tracepass.evaluator.models import RULE_TYPES, ConversationResult, Outcome, TurnResult
from tracepass.evaluator.scoring.learned_checks import LEARNED_CHECKS

__all__ = ["VIOLATION_RULES", "result_success", "success_of", "turn_outcome", "violation_tally"]

# `rule` label values of tracepass_policy_violations: the checks' and rules' fixed
# vocabulary (a custom value could only come from a foreign evaluator: "other").
VIOLATION_RULES = frozenset((*LEARNED_CHECKS, *RULE_TYPES, "grader"))


def success_of(outcome: Outcome) -> bool | None:
    """What an outcome says about the agent for pass@k: incomplete counts as a failure
    (the user did not get a finished conversation); error (a grader/judge could not
    decide) and unscored (no reference) are no evidence either way and stay out of n."""
    if outcome is Outcome.PASS:
        return True
    if outcome in (Outcome.FAIL, Outcome.INCOMPLETE):
        return False
    return None


def result_success(result: ConversationResult) -> bool | None:
    """`success_of` for a whole result: a conversation with neither a reference nor an
    agent policy is no evidence even when it is `incomplete` (evicted before it
    finished, so the evaluator reports that rather than `unscored`): there was nothing to
    score it against."""
    if result.reference_id is None and result.policy_id is None:
        return None
    return success_of(result.outcome)


def violation_tally(result: ConversationResult) -> dict[str, int]:
    """rule → violations of one result (learned checks, policy rules and graders)."""
    tally: dict[str, int] = {}
    for v in result.violations:
        rule = v.rule if v.rule in VIOLATION_RULES else "other"
        tally[rule] = tally.get(rule, 0) + 1
    return tally


def turn_outcome(turn: TurnResult) -> str:
    """pass | fail | error | unscored. A turn has no verdict without an error only when
    there is no reference turn to compare it with (a reference-free conversation, or a
    turn beyond the reference's last): that is `unscored`, not a failure."""
    if turn.correct is True:
        return "pass"
    if turn.correct is False:
        return "fail"
    if (
        turn.answer_error is not None
        or turn.tool_error is not None
        or turn.policy_error is not None
        or any(g.error for g in turn.graders)
    ):
        return "error"
    return "unscored"
