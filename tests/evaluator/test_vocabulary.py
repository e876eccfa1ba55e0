"""The contract names of `tracepass.evaluator.vocabulary` are the ones every surface
offers: the config's choices, the CLI's, the scoring config's."""

from __future__ import annotations

from typing import get_args

from tracepass.collector.app.cli.scoring_options import DefaultGrader, Profile
from tracepass.collector.config import CollectorConfig, EvaluationSettings
from tracepass.collector.service import build_evaluator
from tracepass.evaluator import vocabulary
from tracepass.evaluator.graders import grader_class, grader_types
from tracepass.evaluator.scoring.evaluator import EvaluationConfig
from tracepass.evaluator.vocabulary import DEFAULT_GRADERS, JUDGE_GRADERS, K_METRICS, PROFILES


def test_cli_choices_are_the_vocabulary() -> None:
    assert tuple(p.value for p in Profile) == PROFILES
    assert tuple(g.value for g in DefaultGrader) == DEFAULT_GRADERS


def test_config_choices_are_the_vocabulary() -> None:
    assert get_args(EvaluationSettings.model_fields["profile"].annotation) == PROFILES
    assert get_args(EvaluationSettings.model_fields["default_grader"].annotation) == DEFAULT_GRADERS
    assert get_args(EvaluationConfig.model_fields["profile"].annotation) == PROFILES


def test_names_are_real_graders_and_estimators() -> None:
    assert set(DEFAULT_GRADERS) | JUDGE_GRADERS <= set(grader_types())
    assert K_METRICS == ("pass_at_k", "pass_pow_k")


def test_the_service_scores_with_the_configured_settings() -> None:
    config = CollectorConfig.model_validate(
        {"evaluation": {"profile": "fair-forge", "threshold": 0.5, "default_grader": "exact"}}
    )
    scoring = build_evaluator(config).config
    assert (scoring.profile, scoring.threshold, scoring.default_grader) == (
        "fair-forge",
        0.5,
        "exact",
    )


def test_the_named_constants_are_the_literal_types_values() -> None:
    """The `Literal` types spell their values again (typing needs literals): each named
    constant is one of them, and every value has its constant."""
    assert (vocabulary.PROFILE_DEFAULT, vocabulary.PROFILE_FAIR_FORGE) == PROFILES
    graders = (
        vocabulary.GRADER_EXACT,
        vocabulary.GRADER_CONTAINS,
        vocabulary.GRADER_NUMERIC,
        vocabulary.GRADER_LLM,
    )
    assert graders == DEFAULT_GRADERS
    assert vocabulary.DEFAULT_GRADER in DEFAULT_GRADERS
    assert (vocabulary.PASS_AT_K, vocabulary.PASS_POW_K) == K_METRICS
    assert tuple(vocabulary.K_METRIC_SYMBOLS) == K_METRICS


def test_each_built_in_grader_is_registered_under_its_vocabulary_name() -> None:
    for name in DEFAULT_GRADERS:
        assert grader_class(name).type_name == name
