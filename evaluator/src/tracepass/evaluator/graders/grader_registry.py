"""Grader registry: type name → grader class, and building graders from specs.

Built-in graders are listed by module path and imported on first use, so importing the
registry stays cheap and `llm` never drags langchain-core in unless a reference uses it.
Building validates options once; the result is cached per spec object (specs are frozen
and long-lived: a reference set is loaded once and scored millions of times).
"""

from __future__ import annotations

import importlib
import weakref
from typing import Any

from pydantic import ValidationError

from tracepass.evaluator.graders.base import Grader, GraderConfigError
from tracepass.evaluator.models import GraderSpec
from tracepass.evaluator.vocabulary import GRADER_CONTAINS, GRADER_EXACT, GRADER_LLM, GRADER_NUMERIC

_BUILTINS: dict[str, str] = {
    GRADER_EXACT: "tracepass.evaluator.graders.exact:ExactGrader",
    GRADER_CONTAINS: "tracepass.evaluator.graders.contains:ContainsGrader",
    "regex": "tracepass.evaluator.graders.regex:RegexGrader",
    GRADER_NUMERIC: "tracepass.evaluator.graders.numeric:NumericGrader",
    "json_match": "tracepass.evaluator.graders.json_match:JsonMatchGrader",
    "constraint": "tracepass.evaluator.graders.constraint:ConstraintGrader",
    "command": "tracepass.evaluator.graders.command:CommandGrader",
    GRADER_LLM: "tracepass.evaluator.graders.llm:LLMGrader",
}
_registered: dict[str, type[Grader[Any]]] = {}
# Options every spec may carry that are not the grader's own.
_COMMON = frozenset({"name"})


def register_grader(cls: type[Grader[Any]]) -> type[Grader[Any]]:
    """Register a custom grader class under `cls.type_name` (usable as a decorator)."""
    _registered[cls.type_name] = cls
    return cls


def grader_types() -> list[str]:
    return sorted({*_BUILTINS, *_registered})


def grader_class(type_name: str) -> type[Grader[Any]]:
    if type_name in _registered:
        return _registered[type_name]
    target = _BUILTINS.get(type_name)
    if target is None:
        raise GraderConfigError(
            type_name, f"unknown grader type; known types: {', '.join(grader_types())}"
        )
    module_name, _, attr = target.partition(":")
    cls: type[Grader[Any]] = getattr(importlib.import_module(module_name), attr)
    _registered[type_name] = cls
    return cls


def _loc(loc: tuple[str | int, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def build_grader(spec: GraderSpec) -> Grader[Any]:
    """Validate `spec`'s options and return a ready grader.

    Raises `GraderConfigError` naming the grader, the option path and the problem (the
    first pydantic error; the rest usually follow from the same typo).
    """
    cls = grader_class(spec.type)
    raw = {k: v for k, v in (spec.model_extra or {}).items() if k not in _COMMON}
    try:
        options = cls.options_model.model_validate(raw)
        grader = cls(options)
        grader.name = display_name(spec)
        return grader
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            allowed = ", ".join(sorted(cls.options_model.model_fields))
            msg = f"unknown option (allowed: {allowed})"
        raise GraderConfigError(spec.type, msg, _loc(tuple(err["loc"]))) from None
    except ValueError as exc:  # grader-specific checks done in __init__ (e.g. bad regex)
        if isinstance(exc, GraderConfigError):
            raise
        raise GraderConfigError(spec.type, str(exc)) from None


def validate_grader_spec(spec: GraderSpec) -> None:
    """For reference loaders: raise `GraderConfigError` now rather than at scoring time."""
    build_grader(spec)


_cache: dict[int, tuple[weakref.ref[GraderSpec], Grader[Any]]] = {}


def cached_grader(spec: GraderSpec) -> Grader[Any]:
    """`build_grader` memoized by spec identity (dropped when the spec is collected)."""
    key = id(spec)
    hit = _cache.get(key)
    if hit is not None and hit[0]() is spec:
        return hit[1]
    grader = build_grader(spec)

    def _forget(_ref: weakref.ref[GraderSpec], k: int = key) -> None:
        _cache.pop(k, None)

    _cache[key] = (weakref.ref(spec, _forget), grader)
    return grader


def display_name(spec: GraderSpec) -> str:
    name = (spec.model_extra or {}).get("name")
    return name if isinstance(name, str) and name else spec.type
