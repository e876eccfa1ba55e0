"""Answer graders. Each grader type lives in its own module; see `docs/graders.md`.

Use `build_grader(spec)` (or `validate_grader_spec` in loaders) and `grader_types()`;
custom graders subclass `Grader` and are added with `register_grader`.
"""

from tracepass.evaluator.graders.base import (
    GradeInput,
    Grader,
    GraderConfigError,
    GraderOptions,
    NeedsEventLoop,
    Verdict,
)
from tracepass.evaluator.graders.grader_registry import (
    build_grader,
    cached_grader,
    display_name,
    grader_class,
    grader_types,
    register_grader,
    validate_grader_spec,
)

__all__ = [
    "GradeInput",
    "Grader",
    "GraderConfigError",
    "GraderOptions",
    "NeedsEventLoop",
    "Verdict",
    "build_grader",
    "cached_grader",
    "display_name",
    "grader_class",
    "grader_types",
    "register_grader",
    "validate_grader_spec",
]
