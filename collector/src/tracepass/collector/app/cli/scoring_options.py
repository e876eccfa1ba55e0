"""`tracepass evaluate`'s scoring options: every field of the evaluator's
`EvaluationConfig` that the docs document, as a flag.

One precedence for all of them, so CI scores exactly what `serve` scores: a flag given
on the command line wins; else the `--config` file's `evaluation:` section; else the
documented default (the same as `serve`'s).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

import typer

from tracepass.evaluator.vocabulary import (
    GRADER_CONTAINS,
    GRADER_EXACT,
    GRADER_LLM,
    GRADER_NUMERIC,
    PROFILE_DEFAULT,
    PROFILE_FAIR_FORGE,
)

__all__ = [
    "DefaultGrader",
    "DefaultGraderOption",
    "Profile",
    "ProfileOption",
    "RepeatedCallLimitOption",
    "SingleToolUseOption",
    "ThresholdOption",
    "ToolThresholdOption",
    "TrajectoryMatch",
    "TrajectoryMatchOption",
    "Utilization",
    "UtilizationOption",
    "WeightsOption",
    "parse_weights",
    "scoring_fields",
]


class Profile(StrEnum):
    DEFAULT = PROFILE_DEFAULT
    FAIR_FORGE = PROFILE_FAIR_FORGE


class DefaultGrader(StrEnum):
    EXACT = GRADER_EXACT
    CONTAINS = GRADER_CONTAINS
    NUMERIC = GRADER_NUMERIC
    LLM = GRADER_LLM


class TrajectoryMatch(StrEnum):
    NAME = "name"
    NAME_AND_ARGUMENTS = "name_and_arguments"


class Utilization(StrEnum):
    AUTO = "auto"
    DECLARED = "declared"
    DETECTED = "detected"


_FROM_CONFIG = "(default: the --config file's evaluation.{key}, else {default})"

ProfileOption = Annotated[
    Profile | None,
    typer.Option(
        "--profile",
        help="Scoring definitions. " + _FROM_CONFIG.format(key="profile", default="default"),
        show_default=False,
    ),
]
DefaultGraderOption = Annotated[
    DefaultGrader | None,
    typer.Option(
        "--default-grader",
        help="Answer grader for references that name none. "
        + _FROM_CONFIG.format(key="default_grader", default="contains"),
        show_default=False,
    ),
]
ThresholdOption = Annotated[
    float | None,
    typer.Option(
        "--threshold",
        min=0.0,
        max=1.0,
        help="Answer score needed to pass. " + _FROM_CONFIG.format(key="threshold", default="0.7"),
        show_default=False,
    ),
]
ToolThresholdOption = Annotated[
    float | None,
    typer.Option(
        "--tool-threshold",
        min=0.0,
        max=1.0,
        help="Tool correctness needed to pass. "
        + _FROM_CONFIG.format(key="tool_threshold", default="1.0"),
        show_default=False,
    ),
]
TrajectoryMatchOption = Annotated[
    TrajectoryMatch | None,
    typer.Option(
        "--trajectory-match",
        help="Trajectory unit: the tool name, or name and the expected tool's argument "
        "rule (an ADK-style wrong argument then fails `exact`). "
        + _FROM_CONFIG.format(key="trajectory_match", default="name"),
        show_default=False,
    ),
]
UtilizationOption = Annotated[
    Utilization | None,
    typer.Option(
        "--utilization",
        help="Tool utilization: declared by the span, detected in the answer, or auto. "
        + _FROM_CONFIG.format(key="utilization", default="auto"),
        show_default=False,
    ),
]
WeightsOption = Annotated[
    str | None,
    typer.Option(
        "--weights",
        help="Tool-correctness weights, e.g. selection=0.4,parameters=0.4,sequence=0.2,"
        "utilization=0 (dimensions left out keep their value). "
        + _FROM_CONFIG.format(key="weights", default="0.25 each"),
        show_default=False,
    ),
]
SingleToolUseOption = Annotated[
    list[str] | None,
    typer.Option(
        "--single-tool-use",
        help="Tool name for the single-tool-use trajectory metric (repeatable). "
        + _FROM_CONFIG.format(key="single_tool_use", default="none"),
        show_default=False,
    ),
]
RepeatedCallLimitOption = Annotated[
    int | None,
    typer.Option(
        "--repeated-call-limit",
        min=1,
        help="Identical tool calls allowed per turn by the repeated_call check. "
        + _FROM_CONFIG.format(key="repeated_call_limit", default="2"),
        show_default=False,
    ),
]

_DIMENSIONS = ("selection", "parameters", "sequence", "utilization")


def parse_weights(text: str, base: dict[str, float] | None = None) -> dict[str, float]:
    """`selection=0.4,parameters=0.4` → the four weights (the others from `base`).

    Raises ValueError naming the bad item: an unknown dimension, a value that is not a
    finite non-negative number, a dimension given twice.
    """
    out = dict(base) if base else dict.fromkeys(_DIMENSIONS, 0.25)
    seen: set[str] = set()
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            continue
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or name not in _DIMENSIONS:
            raise ValueError(
                f"--weights: {item!r} is not DIMENSION=WEIGHT with DIMENSION one of "
                + ", ".join(_DIMENSIONS)
            )
        if name in seen:
            raise ValueError(f"--weights: {name} given twice")
        seen.add(name)
        try:
            weight = float(value)
        except ValueError:
            raise ValueError(f"--weights: {item!r}: {value.strip()!r} is not a number") from None
        if not weight >= 0 or weight == float("inf"):
            raise ValueError(f"--weights: {item!r}: a weight is a finite number >= 0")
        out[name] = weight
    if not seen:
        raise ValueError("--weights: no DIMENSION=WEIGHT given")
    return out


def scoring_fields(flags: dict[str, Any], file_settings: Any | None) -> dict[str, Any]:
    """The `EvaluationConfig` fields: each flag given (not None) wins over the config
    file's `evaluation:` value of the same name, which wins over the default.

    `flags["weights"]` is the `--weights` text (applied over the file's weights).
    """
    from tracepass.collector.config import EvaluationSettings

    base = file_settings if file_settings is not None else EvaluationSettings()
    fields: dict[str, Any] = {
        "profile": base.profile,
        "threshold": base.threshold,
        "tool_threshold": base.tool_threshold,
        "default_grader": base.default_grader,
        "weights": base.weights.model_dump(),
        "trajectory_match": base.trajectory_match,
        "utilization": base.utilization,
        "single_tool_use": tuple(base.single_tool_use),
        "repeated_call_limit": base.repeated_call_limit,
    }
    for key, value in flags.items():
        if value is None or (key == "single_tool_use" and not value):
            continue
        if key == "weights":
            fields["weights"] = parse_weights(value, fields["weights"])
        elif key == "single_tool_use":
            fields[key] = tuple(value)
        else:
            fields[key] = value.value if isinstance(value, StrEnum) else value
    return fields
