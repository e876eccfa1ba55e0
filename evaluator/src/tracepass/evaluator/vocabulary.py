"""Names that are contracts, spelled once: scoring profiles, the built-in default
graders a config may name, the graders that call the LLM judge, and the two pass@k
estimators' labels. Config models, the CLI's choices, sampling, gates and reports
read them from here (`tests/evaluator/test_vocabulary.py` checks the CLI agrees)."""

from __future__ import annotations

from typing import Final, Literal, get_args

__all__ = [
    "DEFAULT_GRADER",
    "DEFAULT_GRADERS",
    "GRADER_CONTAINS",
    "GRADER_EXACT",
    "GRADER_LLM",
    "GRADER_NUMERIC",
    "JUDGE_GRADERS",
    "K_METRICS",
    "K_METRIC_SYMBOLS",
    "PASS_AT_K",
    "PASS_POW_K",
    "PROFILES",
    "PROFILE_DEFAULT",
    "PROFILE_FAIR_FORGE",
    "DefaultGrader",
    "KMetric",
    "Profile",
]

# (The `Literal` types spell their values again because typing needs literals; the test
# of this module checks each agrees with the constants.)

# Scoring profiles (`evaluation.profile`, `tracepass evaluate --profile`).
PROFILE_DEFAULT: Final = "default"
PROFILE_FAIR_FORGE: Final = "fair-forge"
Profile = Literal["default", "fair-forge"]
PROFILES: Final[tuple[str, ...]] = get_args(Profile)

# Built-in graders a config may name (their `type_name`s and registry keys).
GRADER_EXACT: Final = "exact"
GRADER_CONTAINS: Final = "contains"
GRADER_NUMERIC: Final = "numeric"
GRADER_LLM: Final = "llm"
# Graders a reference turn without its own falls back to (`evaluation.default_grader`).
DefaultGrader = Literal["exact", "contains", "numeric", "llm"]
DEFAULT_GRADERS: Final[tuple[str, ...]] = get_args(DefaultGrader)
DEFAULT_GRADER: Final = GRADER_CONTAINS  # when the config names none

# Graders that call the LLM judge (what the judge budget and adaptive sampling count).
JUDGE_GRADERS: Final[frozenset[str]] = frozenset({GRADER_LLM})

# The two estimators of the metrics, gates and reports: pass@k and pass^k.
PASS_AT_K: Final = "pass_at_k"
PASS_POW_K: Final = "pass_pow_k"
KMetric = Literal["pass_at_k", "pass_pow_k"]
K_METRICS: Final[tuple[str, ...]] = get_args(KMetric)
# How tables and reports write each estimator: its symbol, then k ("pass@3", "pass^k").
K_METRIC_SYMBOLS: Final[dict[str, str]] = {PASS_AT_K: "pass@", PASS_POW_K: "pass^"}
