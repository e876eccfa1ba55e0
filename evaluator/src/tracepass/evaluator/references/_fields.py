"""Field readers shared by the reference schema (`reference_schema.py`) and the policies schema
(`policy_schema.py`): each checks one value's type at a field path and raises a
`ReferenceLoadError` naming that path (the loader adds file and line)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from tracepass.evaluator.models import GraderSpec
from tracepass.evaluator.references.errors import ReferenceLoadError

Path = tuple[str | int, ...]


def _fail(path: Path, message: str) -> ReferenceLoadError:
    return ReferenceLoadError(message, path=path)


def _type_name(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int | float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, Mapping):
        return "mapping"
    if isinstance(v, list | tuple):
        return "list"
    return type(v).__name__


def _mapping(v: Any, path: Path) -> Mapping[str, Any]:
    if not isinstance(v, Mapping):
        raise _fail(path, f"expected a mapping, got {_type_name(v)}")
    return v


def _list(v: Any, path: Path) -> Sequence[Any]:
    if not isinstance(v, list | tuple):
        raise _fail(path, f"expected a list, got {_type_name(v)}")
    return v


def _string(v: Any, path: Path) -> str:
    if not isinstance(v, str) or not v:
        raise _fail(path, f"expected a non-empty string, got {_type_name(v)}")
    return v


def _unknown(m: Mapping[str, Any], allowed: set[str], path: Path) -> None:
    for k in m:
        if k not in allowed:
            raise _fail(
                (*path, str(k)), f"unknown field (expected one of {', '.join(sorted(allowed))})"
            )


def _validation(exc: ValidationError, path: Path) -> ReferenceLoadError:
    err = exc.errors()[0]
    return _fail((*path, *err["loc"]), err["msg"])


def _graders(v: Any, path: Path) -> tuple[GraderSpec, ...]:
    items = [v] if isinstance(v, str | Mapping) else _list(v, path)
    out: list[GraderSpec] = []
    for k, item in enumerate(items):
        p = path if isinstance(v, str | Mapping) else (*path, k)
        raw = {"type": item} if isinstance(item, str) else dict(_mapping(item, p))
        try:
            spec = GraderSpec.model_validate(raw)
        except ValidationError as exc:
            raise _validation(exc, p) from exc
        _check_grader(spec, p)
        out.append(spec)
    return tuple(out)


def _check_grader(spec: GraderSpec, path: Path) -> None:
    if spec.type == "command":
        from tracepass.evaluator.graders.permissions import reference_code_refusal

        refusal = reference_code_refusal("a command grader")
        if refusal is not None:
            raise _fail((*path, "type"), refusal)
    try:
        from tracepass.evaluator.graders import GraderConfigError, validate_grader_spec
    except ImportError:  # graders not installed in this build: validated at scoring time
        return
    try:
        validate_grader_spec(spec)
    except GraderConfigError as exc:
        sub: Path = tuple(exc.path.split(".")) if exc.path else ()
        raise _fail((*path, *sub), exc.message) from exc
