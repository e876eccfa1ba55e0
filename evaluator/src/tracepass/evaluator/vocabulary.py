"""Names that are contracts, spelled once: scoring profiles, the built-in default
graders a config may name, the graders that call the LLM judge, and the two pass@k
estimators' labels. Config models, the CLI's choices, sampling, gates and reports
read them from here (`tests/evaluator/test_vocabulary.py` checks the CLI agrees)."""

from __future__ import annotations

from typing import Final, Literal, get_args

__all__ = [
    "DEFAULT_GRADERS",
    "JUDGE_GRADERS",
    "K_METRICS",
    "PROFILES",
    "DefaultGrader",
    "KMetric",
    "Profile",
]

# Scoring profiles (`evaluation.profile`, `tracepass evaluate --profile`).
Profile = Literal["default", "fair-forge"]
PROFILES: Final[tuple[str, ...]] = get_args(Profile)

# Graders a reference turn without its own falls back to (`evaluation.default_grader`).
DefaultGrader = Literal["exact", "contains", "numeric", "llm"]
DEFAULT_GRADERS: Final[tuple[str, ...]] = get_args(DefaultGrader)

# Graders that call the LLM judge (what the judge budget and adaptive sampling count).
JUDGE_GRADERS: Final[frozenset[str]] = frozenset({"llm"})

# The two estimators of the metrics, gates and reports: pass@k and pass^k.
KMetric = Literal["pass_at_k", "pass_pow_k"]
K_METRICS: Final[tuple[str, ...]] = get_args(KMetric)
