"""How an evaluation outcome counts: as evidence of success, failure, or neither. Shared by
the metrics and the evaluation events so both label a result the same way."""

from __future__ import annotations

from tracepass.evaluator.models import ConversationResult, Outcome, TurnResult

__all__ = ["result_success", "success_of", "turn_outcome"]


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
    """`success_of` for a whole result: a conversation without a reference is no
    evidence even when it is `incomplete` (evicted before it finished, so the evaluator
    reports that rather than `unscored`): there was nothing to score it against."""
    return None if result.reference_id is None else success_of(result.outcome)


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
        or any(g.error for g in turn.graders)
    ):
        return "error"
    return "unscored"
