"""Validation of tool-argument JSON Schemas that come from spans: anyone who can send one
span chooses the schema, so it is treated as hostile (docs/metrics.md, "Schemas from
spans are untrusted"; docs/reliability.md).

* nothing is ever fetched: `$ref` (and `$dynamicRef`, `$recursiveRef`) must point into
  the document (`#…`), and the validator's `referencing.Registry` retrieves nothing, so
  a reference that escapes anyway is unresolvable instead of a request;
* the schema is bounded before it is compiled: serialized size, nesting depth, node count;
* `pattern`, `patternProperties` (and `additionalProperties` next to them) run on RE2,
  which matches in linear time (no catastrophic backtracking); a pattern RE2 cannot
  compile (look-around, back-references) is refused;
* `uniqueItems` hashes canonical items once (linear) instead of comparing pairs;
* every keyword checks a per-conversation deadline, so validation stops on time.

A schema or validation that exceeds a bound raises `SchemaUnknown` with a reason from
`UNKNOWN_REASONS`: the check is *unknown* for that call (no violation, no verdict), and
the reason is counted (`unknown_counts`, exported as
`tracepass_schema_checks_unknown_total{reason}`).
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from functools import cache
from typing import TYPE_CHECKING, Any

import re2

# jsonschema and referencing (≈ 0.1 s to import) are imported where a schema is first
# compiled or validated: most conversations declare none, and every `tracepass` command
# start-up paid for them.
if TYPE_CHECKING:
    from referencing import Registry

__all__ = [
    "INLINE_BUDGET_S",
    "MAX_SCHEMA_BYTES",
    "MAX_SCHEMA_DEPTH",
    "MAX_SCHEMA_NODES",
    "SCHEMA_TIME_LIMIT_S",
    "UNKNOWN_REASONS",
    "LeaveTheLoop",
    "SchemaUnknown",
    "compile_re2",
    "count_unknown",
    "guarded_validator",
    "inline_attempt",
    "run_guarded",
    "schema_bound_problem",
    "time_limit",
    "unknown_counts",
]

# Bounds on one span-declared schema (real tool schemas are a few KiB, depth < 10).
MAX_SCHEMA_BYTES = 64 * 1024
MAX_SCHEMA_DEPTH = 32
MAX_SCHEMA_NODES = 10_000
# Wall time for validating every call of one conversation against its schemas.
SCHEMA_TIME_LIMIT_S = 1.0
# What the event loop may spend on them before the conversation moves to a worker thread.
INLINE_BUDGET_S = 0.01
# RE2's memory budget per compiled pattern (its default is 8 MiB).
_RE2_MAX_MEM = 1 << 20

UNKNOWN_REASONS = (
    "schema_too_large",  # serialized size, depth or node count beyond the bounds
    "external_ref",  # a `$ref` that leaves the document (never fetched)
    "ref_unresolvable",  # a `$ref` into the document that does not resolve
    "pattern_unsupported",  # a pattern RE2 cannot run (look-around, back-reference, size)
    "unsupported",  # keywords whose patterns would run outside RE2
    "time_limit",  # the conversation's validation time ran out
    "recursion",  # a `$ref` cycle or nesting deeper than the interpreter's stack
)
_REF_KEYWORDS = ("$ref", "$dynamicRef", "$recursiveRef")


class SchemaUnknown(Exception):
    """The schema check cannot be decided within the bounds: `reason` is one of
    `UNKNOWN_REASONS`."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


_counts_lock = threading.Lock()
_counts: dict[str, int] = dict.fromkeys(UNKNOWN_REASONS, 0)


def count_unknown(reason: str) -> None:
    pending: list[str] | None = getattr(_local, "pending", None)
    if pending is not None:  # inside `inline_attempt`: counted only if it completes
        pending.append(reason)
        return
    with _counts_lock:
        _counts[reason] = _counts.get(reason, 0) + 1


def unknown_counts() -> dict[str, int]:
    """Schema checks left unknown since start-up, per reason (a snapshot)."""
    with _counts_lock:
        return dict(_counts)


# ----------------------------------------------------------------------------- deadline

_local = threading.local()


@contextmanager
def time_limit(seconds: float = SCHEMA_TIME_LIMIT_S) -> Iterator[None]:
    """Every guarded validation inside the block (on this thread) shares one deadline;
    nested blocks keep the outer, earlier one."""
    outer: float | None = getattr(_local, "deadline", None)
    mine = time.monotonic() + seconds
    _local.deadline = mine if outer is None else min(outer, mine)
    try:
        yield
    finally:
        _local.deadline = outer


class LeaveTheLoop(BaseException):  # not an Exception: no `except Exception` may eat it
    """Validation inside `inline_attempt` outran its budget: redo it on a worker thread
    (under the full `SCHEMA_TIME_LIMIT_S`)."""


@contextmanager
def inline_attempt(seconds: float = INLINE_BUDGET_S) -> Iterator[None]:
    """Validate on the calling thread (the event loop) for at most `seconds`; past that,
    `LeaveTheLoop` is raised and nothing the attempt counted is kept. The common schema
    is checked in microseconds, so a worker-thread hop (~0.4 ms measured) is paid only
    by the schemas that need it."""
    outer_pending: list[str] | None = getattr(_local, "pending", None)
    pending: list[str] = []
    _local.pending = pending
    try:
        with time_limit(seconds):
            yield
    finally:
        _local.pending = outer_pending
    for reason in pending:  # reached only when the attempt completed
        count_unknown(reason)


def _check_deadline() -> None:
    deadline: float | None = getattr(_local, "deadline", None)
    if deadline is not None and time.monotonic() > deadline:
        if getattr(_local, "pending", None) is not None:
            raise LeaveTheLoop
        raise SchemaUnknown("time_limit", "the conversation's schema validation time ran out")


# ----------------------------------------------------------------------------- static bounds


def _pattern_problem(pattern: str) -> str | None:
    try:
        _re2(pattern)
    except re2.error as exc:
        return f"pattern {pattern[:100]!r} cannot run on RE2: {exc}"
    return None


def schema_bound_problem(schema: Mapping[str, Any]) -> SchemaUnknown | None:
    """Why `schema` may not be compiled (None: within every bound). Checked before any
    `jsonschema` code sees it."""
    try:
        size = len(json.dumps(schema, separators=(",", ":"), default=str))
    except (ValueError, RecursionError) as exc:
        return SchemaUnknown("schema_too_large", f"not serializable: {type(exc).__name__}")
    if size > MAX_SCHEMA_BYTES:
        return SchemaUnknown("schema_too_large", f"{size} bytes (at most {MAX_SCHEMA_BYTES})")
    nodes = 0
    has_unevaluated = has_pattern_properties = False
    stack: list[tuple[Any, int]] = [(schema, 1)]
    while stack:
        node, depth = stack.pop()
        nodes += 1
        if depth > MAX_SCHEMA_DEPTH:
            return SchemaUnknown("schema_too_large", f"nested deeper than {MAX_SCHEMA_DEPTH}")
        if nodes > MAX_SCHEMA_NODES:
            return SchemaUnknown("schema_too_large", f"more than {MAX_SCHEMA_NODES} nodes")
        if isinstance(node, Mapping):
            for key, value in node.items():
                if key in _REF_KEYWORDS and isinstance(value, str) and not value.startswith("#"):
                    return SchemaUnknown(
                        "external_ref", f"{key} {value[:200]!r} leaves the document"
                    )
                if key == "pattern" and isinstance(value, str):
                    problem = _pattern_problem(value)
                    if problem is not None:
                        return SchemaUnknown("pattern_unsupported", problem)
                if key == "patternProperties" and isinstance(value, Mapping):
                    has_pattern_properties = True
                    for pattern in value:
                        problem = _pattern_problem(str(pattern))
                        if problem is not None:
                            return SchemaUnknown("pattern_unsupported", problem)
                if key == "unevaluatedProperties":
                    has_unevaluated = True
                if isinstance(value, (Mapping, list)):
                    stack.append((value, depth + 1))
        elif isinstance(node, list):
            stack.extend((item, depth + 1) for item in node if isinstance(item, (Mapping, list)))
    if has_unevaluated and has_pattern_properties:
        # jsonschema evaluates patternProperties for unevaluatedProperties with `re`.
        return SchemaUnknown("unsupported", "unevaluatedProperties together with patternProperties")
    return None


# ----------------------------------------------------------------------------- keywords

_re2_cache: dict[str, Any] = {}
_RE2_CACHE_LIMIT = 1024


def _re2(pattern: str) -> Any:
    compiled = _re2_cache.get(pattern)
    if compiled is None:
        options = re2.Options()
        options.log_errors = False
        options.max_mem = _RE2_MAX_MEM
        compiled = re2.compile(pattern, options)
        if len(_re2_cache) >= _RE2_CACHE_LIMIT:
            _re2_cache.clear()
        _re2_cache[pattern] = compiled
    return compiled


def compile_re2(pattern: str) -> Any:
    """`pattern` compiled by RE2 within the memory budget (cached); raises `re2.error`.
    Shared with the collector's `conventions.custom` patterns: one safe-regex helper."""
    return _re2(pattern)


def _pattern(validator: Any, pattern: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if validator.is_type(instance, "string") and not _re2(pattern).search(instance):
        from jsonschema import exceptions as jsonschema_errors

        yield jsonschema_errors.ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator: Any, patterns: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        compiled = _re2(pattern)
        for key, value in instance.items():
            _check_deadline()
            if compiled.search(key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional(instance: Mapping[str, Any], schema: Mapping[str, Any]) -> list[str]:
    properties = schema.get("properties", {})
    patterns = [_re2(p) for p in schema.get("patternProperties", {})]
    return [
        key
        for key in instance
        if key not in properties and not any(p.search(key) for p in patterns)
    ]


def _additional_properties(
    validator: Any, allowed: Any, instance: Any, schema: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    extras = _additional(instance, schema)
    if validator.is_type(allowed, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], allowed, path=extra)
    elif not allowed and extras:
        from jsonschema import exceptions as jsonschema_errors

        listed = ", ".join(repr(e) for e in sorted(extras))
        if "patternProperties" in schema:
            verb = "does" if len(extras) == 1 else "do"
            regexes = ", ".join(repr(p) for p in sorted(schema["patternProperties"]))
            yield jsonschema_errors.ValidationError(
                f"{listed} {verb} not match any of the regexes: {regexes}"
            )
        else:
            verb = "was" if len(extras) == 1 else "were"
            yield jsonschema_errors.ValidationError(
                f"Additional properties are not allowed ({listed} {verb} unexpected)"
            )


def _hashable(value: Any) -> Any:
    """A key equal for JSON-equal values: 1 == 1.0, true ≠ 1, objects by their items."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return (type(value).__name__, value)
    if isinstance(value, (int, float)):
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            return ("number", int(value))
        return ("number", value)
    if isinstance(value, Mapping):
        return ("object", frozenset((str(k), _hashable(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return ("array", tuple(_hashable(v) for v in value))
    return ("other", repr(value))


def _unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not unique or not validator.is_type(instance, "array"):
        return
    seen: set[Any] = set()
    for item in instance:
        key = _hashable(item)
        if key in seen:
            from jsonschema import exceptions as jsonschema_errors

            yield jsonschema_errors.ValidationError(f"{_short(instance)} has non-unique elements")
            return
        seen.add(key)


def _short(instance: Any) -> str:
    text = repr(instance)
    return text if len(text) <= 200 else text[:200] + "…"


def _guard(keyword: Any) -> Any:
    def guarded(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        _check_deadline()
        return keyword(validator, value, instance, schema)

    return guarded


_OVERRIDES = {
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
    "uniqueItems": _unique_items,
}
_guarded_classes: dict[Any, Any] = {}


def _guarded_class(base: Any) -> Any:
    cls = _guarded_classes.get(base)
    if cls is None:
        keywords = dict(base.VALIDATORS)
        for name in _OVERRIDES:
            if name in keywords:
                keywords[name] = _OVERRIDES[name]
        from jsonschema import validators

        cls = validators.extend(base, {k: _guard(fn) for k, fn in keywords.items()})
        _guarded_classes[base] = cls
    return cls


def _retrieve_nothing(uri: str) -> Any:
    """The registry's retrieval: span-declared schemas never cause a fetch."""
    from referencing import exceptions as referencing_errors

    raise referencing_errors.NoSuchResource(ref=uri)  # type: ignore[call-arg]


@cache
def _no_retrieval() -> Registry[Any]:
    from referencing import Registry

    # (attrs spells the field `_retrieve`, its init argument `retrieve`)
    return Registry(retrieve=_retrieve_nothing)  # type: ignore[call-arg]


def guarded_validator(schema: Mapping[str, Any]) -> Any:
    """A validator of `schema` (already checked by `schema_bound_problem` and
    `check_schema`) that fetches nothing, runs patterns on RE2, hashes `uniqueItems`,
    and honours the `time_limit` deadline."""
    from jsonschema import validators

    base = validators.validator_for(schema)
    return _guarded_class(base)(schema, registry=_no_retrieval())


def run_guarded(call: Any) -> Any:
    """`call()` with the failures a bounded validation may hit turned into
    `SchemaUnknown`."""
    from referencing import exceptions as referencing_errors

    try:
        return call()
    except (
        referencing_errors.Unresolvable,
        referencing_errors.NoSuchResource,
        referencing_errors.Unretrievable,
    ) as exc:
        cause = getattr(exc, "_wrapped", exc)  # jsonschema wraps referencing's errors
        fetch = isinstance(
            cause, (referencing_errors.NoSuchResource, referencing_errors.Unretrievable)
        )
        reason = "external_ref" if fetch else "ref_unresolvable"
        raise SchemaUnknown(reason, str(exc)[:200]) from None
    except RecursionError:
        raise SchemaUnknown("recursion", "a $ref cycle or nesting beyond the stack") from None
    except re2.error as exc:
        raise SchemaUnknown("pattern_unsupported", str(exc)[:200]) from None
