"""Argument matching: how well one actual tool call's arguments fit an expected call's.

Every matcher returns a score in [0, 1] rather than a bool so tool correctness can give
per-key partial credit (a call with three of four arguments right scores 0.75, not 0).
A score of exactly 1.0 means "matches" wherever a yes/no answer is needed (trajectory
matching on name + arguments).

Equality is *deep* and JSON-minded: ``1 == 1.0`` (JSON does not distinguish them and
tracers often turn ints into floats), but ``1 != "1"`` and ``True != 1`` — Python's own
``True == 1`` would let a boolean flag satisfy a numeric argument, which is never what a
reference author means. Lists and tuples compare element-wise in order; dicts by keys.

Matchers are *compiled* once per `ExpectedTool` (regexes compiled, custom callables
imported) because scoring runs on every turn and the expected side never changes.
"""

from __future__ import annotations

import importlib
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from tracepass.evaluator.models import ExpectedTool

__all__ = [
    "MATCHERS",
    "ArgumentMatchError",
    "ArgumentMatcher",
    "compile_matcher",
    "deep_equal",
    "match_arguments",
    "numeric_equal",
    "resolve_callable",
    "validate_matcher_name",
]

MATCHERS: tuple[str, ...] = ("exact", "ignore", "subset", "superset", "regex", "numeric")

ArgumentMatcher = Callable[[Mapping[str, Any]], float]
"""A compiled matcher: actual arguments → score in [0, 1]."""


class ArgumentMatchError(ValueError):
    """A matcher that cannot be built (bad regex, unimportable callable) or a custom
    matcher that raised / returned something other than a bool or a number in [0, 1]."""


def _is_number(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def deep_equal(a: Any, b: Any) -> bool:
    """JSON-style deep equality: numbers by value (bool is not a number), containers
    recursively, everything else by ``==`` with matching kinds."""
    if a is b:
        return True
    ta = type(a)
    if ta is str or ta is bool or a is None:
        return ta is type(b) and a == b
    if _is_number(a):
        return _is_number(b) and a == b
    if isinstance(a, Mapping):
        if not isinstance(b, Mapping) or len(a) != len(b):
            return False
        return all(k in b and deep_equal(v, b[k]) for k, v in a.items())
    if isinstance(a, list | tuple):
        if not isinstance(b, list | tuple) or len(a) != len(b):
            return False
        return all(deep_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(b, bool | str | Mapping | list | tuple) or _is_number(b) or b is None:
        return False
    return bool(a == b)


def numeric_equal(a: Any, b: Any, abs_tol: float, rel_tol: float) -> bool:
    """Like `deep_equal`, but numbers anywhere in the structure compare with
    ``math.isclose(a, b, rel_tol=rel_tol, abs_tol=abs_tol)``."""
    if _is_number(a):
        return _is_number(b) and math.isclose(a, b, rel_tol=rel_tol, abs_tol=abs_tol)
    if isinstance(a, Mapping):
        if not isinstance(b, Mapping) or len(a) != len(b):
            return False
        return all(k in b and numeric_equal(v, b[k], abs_tol, rel_tol) for k, v in a.items())
    if isinstance(a, list | tuple):
        if not isinstance(b, list | tuple) or len(a) != len(b):
            return False
        return all(numeric_equal(x, y, abs_tol, rel_tol) for x, y in zip(a, b, strict=True))
    return deep_equal(a, b)


# --------------------------------------------------------------------------- scoring rules


def _union_credit(
    expected: Mapping[str, Any], actual: Mapping[str, Any], eq: Callable[[Any, Any], bool]
) -> float:
    """Per-key credit over the union of keys: a key missing on either side is wrong."""
    if not expected and not actual:
        return 1.0
    good = 0
    for k, v in expected.items():
        if k in actual and eq(v, actual[k]):
            good += 1
    extra = sum(1 for k in actual if k not in expected)
    return good / (len(expected) + extra)


def _subset_credit(expected: Mapping[str, Any], actual: Mapping[str, Any]) -> float:
    if not expected:
        return 1.0
    good = sum(1 for k, v in expected.items() if k in actual and deep_equal(v, actual[k]))
    return good / len(expected)


def _superset_credit(expected: Mapping[str, Any], actual: Mapping[str, Any]) -> float:
    if not actual:
        return 1.0
    good = sum(1 for k, v in actual.items() if k in expected and deep_equal(expected[k], v))
    return good / len(actual)


def validate_matcher_name(name: str) -> str | None:
    """Return an error message if `name` is neither a built-in matcher nor something that
    looks like a dotted import path; None when it is acceptable."""
    if name in MATCHERS:
        return None
    if ("." in name or ":" in name) and all(
        part.isidentifier() for part in re.split(r"[.:]", name) if part
    ):
        return None
    return f"unknown matcher {name!r} (expected one of {', '.join(MATCHERS)}, or a dotted import path 'package.module:function')"


def resolve_callable(path: str) -> Callable[..., Any]:
    """Import ``package.module:function`` or ``package.module.function``."""
    if ":" in path:
        module_name, _, attr = path.partition(":")
    else:
        module_name, _, attr = path.rpartition(".")
    if not module_name or not attr:
        raise ArgumentMatchError(f"matcher {path!r} is not a dotted import path")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ArgumentMatchError(f"matcher {path!r}: cannot import {module_name!r}: {exc}") from exc
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError as exc:
            raise ArgumentMatchError(
                f"matcher {path!r}: module {module_name!r} has no attribute {attr!r}"
            ) from exc
    if not callable(obj):
        raise ArgumentMatchError(f"matcher {path!r} is not callable")
    return obj  # type: ignore[no-any-return]


def _custom(path: str, fn: Callable[..., Any], expected: dict[str, Any]) -> ArgumentMatcher:
    def run(actual: Mapping[str, Any]) -> float:
        try:
            out = fn(expected, dict(actual))
        except Exception as exc:
            raise ArgumentMatchError(
                f"matcher {path!r} raised {type(exc).__name__}: {exc}"
            ) from exc
        if isinstance(out, bool):
            return 1.0 if out else 0.0
        if _is_number(out) and 0.0 <= out <= 1.0:
            return float(out)
        raise ArgumentMatchError(
            f"matcher {path!r} returned {out!r}; expected a bool or a number in [0, 1]"
        )

    return run


def _regex_matcher(expected: dict[str, Any]) -> ArgumentMatcher:
    rules: list[tuple[str, re.Pattern[str] | None, Any]] = []
    for k, v in expected.items():
        if isinstance(v, str):
            try:
                rules.append((k, re.compile(v), None))
            except re.error as exc:
                raise ArgumentMatchError(f"argument {k!r}: invalid regex {v!r}: {exc}") from exc
        else:
            rules.append((k, None, v))  # non-string expectations compare deeply
    n = len(rules)

    def run(actual: Mapping[str, Any]) -> float:
        if n == 0:
            return 1.0
        good = 0
        for k, pat, literal in rules:
            if k not in actual:
                continue
            a = actual[k]
            if pat is None:
                good += deep_equal(literal, a)
            elif pat.fullmatch(a if isinstance(a, str) else str(a)) is not None:
                good += 1
        return good / n

    return run


_SCALARS = (str, int, float, bool, type(None))


def _exact_matcher(expected: dict[str, Any]) -> ArgumentMatcher:
    """`exact` with a fast path for the usual case, arguments copied verbatim.

    For flat expected arguments (scalar values only), ``actual == expected`` plus the
    same type for every value is exactly `deep_equal` on every key: what separates the
    two is only Python's ``True == 1`` / ``1 == 1.0`` and str subclasses, and identical
    scalar types rule those out. Anything else takes the per-key path."""
    if not all(type(v) in _SCALARS for v in expected.values()):
        return lambda actual: _union_credit(expected, actual, deep_equal)
    keys = tuple(expected)
    types = tuple(type(v) for v in expected.values())

    def run(actual: Mapping[str, Any]) -> float:
        try:
            if actual == expected and tuple(map(type, map(actual.__getitem__, keys))) == types:
                return 1.0
        except Exception:  # exotic values (e.g. arrays) that refuse ==: compare per key
            pass
        return _union_credit(expected, actual, deep_equal)

    return run


def _compile(
    mode: str, expected: dict[str, Any] | None, abs_tol: float, rel_tol: float
) -> ArgumentMatcher:
    if expected is None or mode == "ignore":
        return lambda actual: 1.0
    if mode == "exact":
        return _exact_matcher(expected)
    if mode == "subset":
        return lambda actual: _subset_credit(expected, actual)
    if mode == "superset":
        return lambda actual: _superset_credit(expected, actual)
    if mode == "regex":
        return _regex_matcher(expected)
    if mode == "numeric":

        def eq(a: Any, b: Any) -> bool:
            return numeric_equal(a, b, abs_tol, rel_tol)

        return lambda actual: _union_credit(expected, actual, eq)
    problem = validate_matcher_name(mode)
    if problem is not None:
        raise ArgumentMatchError(problem)
    return _custom(mode, resolve_callable(mode), expected)


_compiled: dict[int, tuple[ExpectedTool, ArgumentMatcher]] = {}


def compile_matcher(tool: ExpectedTool) -> ArgumentMatcher:
    """The compiled matcher for `tool` (memoized by identity: references are long-lived
    and immutable, and the cache entry keeps the tool alive so ids are never reused)."""
    hit = _compiled.get(id(tool))
    if hit is not None and hit[0] is tool:
        return hit[1]
    fn = _compile(tool.argument_match, tool.arguments, tool.abs_tol, tool.rel_tol)
    if len(_compiled) > 100_000:  # bound the memo; rebuilt lazily
        _compiled.clear()
    _compiled[id(tool)] = (tool, fn)
    return fn


def match_arguments(
    expected: Mapping[str, Any] | None,
    actual: Mapping[str, Any],
    mode: str = "exact",
    *,
    abs_tol: float = 0.0,
    rel_tol: float = 1e-9,
) -> float:
    """One-off matching (no memo). See the module docstring and docs/metrics.md."""
    return _compile(mode, None if expected is None else dict(expected), abs_tol, rel_tol)(actual)
