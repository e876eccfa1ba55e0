"""Scoring one conversation against its reference (docs/metrics.md): the `Evaluator`
(`evaluator.py`) over tool correctness (`tool_correctness.py`, its argument matchers
`argmatch.py`, the Fair Forge profile `fairforge_profile.py`), trajectories
(`trajectory.py`), answers (`answers.py` + `graders/`), learned checks
(`learned_checks.py`) and agent policies (`agent_policies.py`); then why a conversation
failed (`explain.py`, `failure_signatures.py`).

`from tracepass.evaluator.scoring import Evaluator` is the documented entry point
(README), so the package re-exports `evaluator.py`'s public names.
"""

from tracepass.evaluator.scoring.evaluator import (
    EvaluationConfig,
    Evaluator,
    PendingEvaluation,
    ToolWeights,
)

__all__ = ["EvaluationConfig", "Evaluator", "PendingEvaluation", "ToolWeights"]
