"""Which evaluated conversations go to the review queue (`review.rules`, docs/review.md).

A rule matches a result by its `when` condition and its agent/version/set globs; the
first matching rule whose `rate` keeps the conversation queues it, with the rule's
`when` as the reason. `rate` is decided from the conversation id alone, with the
sampling contract (`evaluator.sampling.keep_conversation`) under `review.seed`: every
replica queues the same conversations, and re-evaluations never queue one twice.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from fnmatch import fnmatchcase

from tracepass.collector.config import ReviewConfig, ReviewRuleConfig
from tracepass.evaluator.models import ConversationResult
from tracepass.evaluator.offline.human_review import is_judge
from tracepass.evaluator.scoring.failure_signatures import is_failing
from tracepass.evaluator.stats.conversation_sampling import keep_conversation

__all__ = ["ReviewRules", "judge_uncertain"]

# (result, conversation complete) → whether a failure signature of it is new in its version.
NewFailureMode = Callable[[ConversationResult, bool], bool]


def _glob(pattern: str | None, value: str | None) -> bool:
    return pattern is None or fnmatchcase(value or "", pattern)


def judge_uncertain(result: ConversationResult, threshold: float, margin: float) -> bool:
    """A judge on some turn gave no verdict (an error, no score) or a score within
    `margin` of the pass `threshold`: the cases a person should decide."""
    for turn in result.turns:
        for grader in turn.graders:
            if not is_judge({"grader": grader.grader}):
                continue
            if grader.passed is None or grader.error is not None or grader.score is None:
                return True
            if abs(grader.score - threshold) <= margin:
                return True
    for judgement in result.judgements:  # conversation judges
        if judgement.passed is None and judgement.outcome.value == "error":
            return True
        if judgement.score is not None and abs(judgement.score - threshold) <= margin:
            return True
    return False


class ReviewRules:
    def __init__(
        self,
        config: ReviewConfig,
        *,
        threshold: float,
        new_failure_mode: NewFailureMode | None = None,
    ) -> None:
        self.rules: Sequence[ReviewRuleConfig] = tuple(config.rules)
        self.seed = config.seed
        self.threshold = threshold
        self.new_failure_mode = new_failure_mode

    def _holds(self, rule: ReviewRuleConfig, result: ConversationResult, complete: bool) -> bool:
        if rule.when == "sampled":
            return True
        if rule.when == "failing":
            return is_failing(result)
        if rule.when == "judge_uncertain":
            return judge_uncertain(result, self.threshold, rule.margin)
        # new_failure_mode: needs the failure-mode index (a state file).
        return (
            self.new_failure_mode is not None
            and is_failing(result)
            and self.new_failure_mode(result, complete)
        )

    def reason(self, result: ConversationResult, complete: bool = True) -> str | None:
        """The `when` of the first rule that queues `result`, or None."""
        for rule in self.rules:
            if not (
                _glob(rule.agent_name, result.agent_name)
                and _glob(rule.agent_version, result.agent_version)
                and _glob(rule.reference_set, result.reference_set)
            ):
                continue
            if not self._holds(rule, result, complete):
                continue
            if keep_conversation(result.conversation_id, rule.rate, self.seed):
                return rule.when
        return None
