"""Checks learned from the spans: what every conversation can be held to with no
reference and no configuration (docs/metrics.md, "Learned checks").

* `unknown_tool`: a call of a tool that was not offered to the model in that turn
  (offered = the policy's declared tools, else the tools the model-call spans list;
  skipped when neither says);
* `arguments_schema`: arguments that violate the tool's declared JSON Schema
  (validated with `jsonschema`; the failing path and message are kept);
* `unrecovered_tool_error`: a call that ended in error with no later successful call
  of the same tool in the same turn;
* `repeated_call`: the same tool with the same arguments called more than `limit`
  times in one turn (default `DEFAULT_REPEATED_CALL_LIMIT`).

Schemas come from, in order of precedence: the policy's `tools`, the model-call spans'
tool definitions, the tool span's own recorded schema (`@tool`). A schema that is not
valid JSON Schema is skipped (it says nothing about the agent) and logged (at most once
a minute).

Schemas are untrusted (a span declares them): they are validated by `schema_guard`
(nothing fetched, bounded size and depth, RE2 patterns, linear `uniqueItems`, one time
limit per conversation). A schema beyond a bound leaves the call's check *unknown*: no
violation, the reason counted (`schema_guard.unknown_counts`) and logged.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from typing import Any

from tracepass.evaluator.models import Conversation, PolicyTool, ToolCall, Turn, Violation
from tracepass.evaluator.schema_guard import (
    SchemaUnknown,
    count_unknown,
    guarded_validator,
    run_guarded,
    schema_bound_problem,
    time_limit,
)

__all__ = [
    "DEFAULT_REPEATED_CALL_LIMIT",
    "LEARNED_CHECKS",
    "check_arguments",
    "learned_violations",
    "needs_schema_validation",
    "schema_problem",
    "validate_arguments",
]

log = logging.getLogger(__name__)

LEARNED_CHECKS = ("unknown_tool", "arguments_schema", "unrecovered_tool_error", "repeated_call")
# Two identical calls are a plausible retry; a third is a loop.
DEFAULT_REPEATED_CALL_LIMIT = 2

_CACHE_LIMIT = 1024
_validators: dict[str, Any] = {}  # canonical schema JSON → validator (None: invalid schema)
# id(schema) → (the schema object, its validator); the object is kept so an id reused
# after garbage collection cannot alias another schema.
_by_identity: dict[int, tuple[Mapping[str, Any], Any]] = {}


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def schema_problem(schema: Mapping[str, Any]) -> str | None:
    """Why `schema` is not a usable JSON Schema (None when it is). Bounds first (an
    unbounded schema is never handed to `jsonschema`), then the metaschema."""
    bound = schema_bound_problem(schema)
    if bound is not None:
        return str(bound)
    # jsonschema is imported where a schema is first checked (schema_guard says why).
    from jsonschema import exceptions as jsonschema_errors
    from jsonschema import validators

    try:
        validators.validator_for(schema).check_schema(schema)
    except jsonschema_errors.SchemaError as exc:
        where = "".join(f"[{p!r}]" for p in exc.path)
        return f"invalid JSON Schema{(' at ' + where) if where else ''}: {exc.message}"
    return None


def _compile(schema: Mapping[str, Any], key: str) -> Any:
    """The guarded validator, None (not JSON Schema) or the `SchemaUnknown` bound it
    exceeds."""
    bound = schema_bound_problem(schema)
    if bound is not None:
        _log_limited(bound.reason, "tool schema left unchecked (%s): %s", bound, key[:200])
        return bound
    from jsonschema import exceptions as jsonschema_errors
    from jsonschema import validators

    try:
        validators.validator_for(schema).check_schema(schema)
    except jsonschema_errors.SchemaError as exc:
        where = "".join(f"[{p!r}]" for p in exc.path)
        problem = f"invalid JSON Schema{(' at ' + where) if where else ''}: {exc.message}"
        _log_limited("invalid", "tool schema skipped (%s): %s", problem, key[:200])
        return None
    except RecursionError:
        unknown = SchemaUnknown("recursion", "the schema nests beyond the stack")
        _log_limited("recursion", "tool schema left unchecked (%s): %s", unknown, key[:200])
        return unknown
    return guarded_validator(schema)


def _validator(schema: Mapping[str, Any]) -> Any:
    """The compiled validator of `schema` (None: not valid JSON Schema; a
    `SchemaUnknown`: beyond a bound). Cached by the schema object's identity first (the
    same definition object serves every call of a conversation), then by its canonical
    JSON (equal schemas from other spans)."""
    hit = _by_identity.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    try:
        key = _canonical(schema)
    except (ValueError, RecursionError):
        return SchemaUnknown("schema_too_large", "not serializable")
    if key in _validators:
        validator = _validators[key]
    else:
        validator = _compile(schema, key)
        if len(_validators) >= _CACHE_LIMIT:
            _validators.clear()
        _validators[key] = validator
    if len(_by_identity) >= _CACHE_LIMIT:
        _by_identity.clear()
    _by_identity[id(schema)] = (schema, validator)
    return validator


def check_arguments(
    arguments: Mapping[str, Any], schema: Mapping[str, Any]
) -> tuple[str, str] | None:
    """(JSON path, message) of the most relevant schema error, or None when valid (or
    when the schema itself is not JSON Schema). Raises `SchemaUnknown` when the schema
    or its validation exceeds a bound (schema_guard)."""
    validator = _validator(schema)
    if validator is None:
        return None
    if isinstance(validator, SchemaUnknown):  # a fresh one: the cached one keeps no traceback
        raise SchemaUnknown(validator.reason, validator.detail)
    if set(arguments) == {"_raw"}:
        raw = arguments["_raw"]
        return "$", f"arguments are not a JSON object: {str(raw)[:200]!r}"
    instance = dict(arguments)
    if run_guarded(lambda: validator.is_valid(instance)):  # common case, no ranking
        return None
    from jsonschema import exceptions as jsonschema_errors

    error = run_guarded(lambda: jsonschema_errors.best_match(validator.iter_errors(instance)))
    if error is None:
        return None
    return error.json_path, error.message


def validate_arguments(
    arguments: Mapping[str, Any], schema: Mapping[str, Any]
) -> tuple[str, str] | None:
    """`check_arguments`, with an unknown check (a bound exceeded) counted and reported
    as None (no verdict)."""
    try:
        with time_limit():
            return check_arguments(arguments, schema)
    except SchemaUnknown as unknown:
        _count(unknown)
        return None


_last_logged: dict[str, float] = {}
_LOG_INTERVAL_S = 60.0


def _log_limited(kind: str, message: str, *args: Any) -> None:
    """Log at most once a minute per kind: each hostile span may bring a new schema."""
    now = time.monotonic()
    if now - _last_logged.get(kind, -_LOG_INTERVAL_S) >= _LOG_INTERVAL_S:
        _last_logged[kind] = now
        log.warning(message, *args)


def _count(unknown: SchemaUnknown) -> None:
    """Count an unknown check; log it at most once a minute per reason."""
    count_unknown(unknown.reason)
    _log_limited("unknown:" + unknown.reason, "arguments_schema check unknown (%s)", unknown)


def needs_schema_validation(conversation: Conversation) -> bool:
    """Whether scoring `conversation` validates arguments against a schema it carries
    (those are run off the event loop: their cost is the sender's choice)."""
    for turn in conversation.turns:
        if not turn.tool_calls:
            continue
        if turn.tool_schemas:
            return True
        for tool in turn.offered_tools or ():
            if tool.parameters is not None:
                return True
    return False


def _first_line(text: str, limit: int = 200) -> str:
    line = text.strip().split("\n", 1)[0]
    return line if len(line) <= limit else line[:limit] + "…"


def _offered(turn: Turn, declared: Mapping[str, PolicyTool] | None) -> set[str] | None:
    if declared is not None:
        return set(declared)
    if turn.offered_tools is None:
        return None
    return {t.name for t in turn.offered_tools}


def _schemas(turn: Turn, declared: Mapping[str, PolicyTool] | None) -> dict[str, Any]:
    out: dict[str, Any] = dict(turn.tool_schemas)
    for t in turn.offered_tools or ():
        if t.parameters is not None:
            out[t.name] = t.parameters
    for name, tool in (declared or {}).items():
        if tool.arguments_schema is not None:
            out[name] = tool.arguments_schema
    return out


def _turn_violations(
    i: int, turn: Turn, declared: Mapping[str, PolicyTool] | None, repeated_limit: int
) -> list[Violation]:
    out: list[Violation] = []
    calls: tuple[ToolCall, ...] = turn.tool_calls
    if not calls:
        return out
    # Only a tool called more than `repeated_limit` times can repeat one call beyond it:
    # the others never need their arguments serialized.
    per_name: dict[str, int] = {}
    any_error = False
    for call in calls:
        per_name[call.name] = per_name.get(call.name, 0) + 1
        if call.error is not None:
            any_error = True
    checks_offer = declared is not None or turn.offered_tools is not None or turn.tool_schemas
    if not checks_offer and not any_error and max(per_name.values()) <= repeated_limit:
        return out  # nothing declared, failed or repeated
    offered = _offered(turn, declared)
    schemas = _schemas(turn, declared) if checks_offer else {}
    seen: dict[tuple[str, str], int] = {}
    for k, call in enumerate(calls):
        name = call.name
        if offered is not None and name not in offered:
            listed = ", ".join(sorted(offered)) or "none"
            out.append(
                Violation(
                    rule="unknown_tool",
                    turn=i,
                    tool_call=k,
                    message=f"called {name!r}, which was not offered (offered: {listed})",
                )
            )
        schema = schemas.get(name)
        if schema is not None and isinstance(schema, Mapping):
            try:
                failed = check_arguments(call.arguments, schema)
            except SchemaUnknown as unknown:
                _count(unknown)
                failed = None
            if failed is not None:
                path, message = failed
                out.append(
                    Violation(
                        rule="arguments_schema",
                        turn=i,
                        tool_call=k,
                        message=f"{name}: {path}: {message}",
                        path=path,
                    )
                )
        if call.error is not None and not any(
            later.name == name and later.error is None for later in calls[k + 1 :]
        ):
            out.append(
                Violation(
                    rule="unrecovered_tool_error",
                    turn=i,
                    tool_call=k,
                    message=(
                        f"{name} failed ({_first_line(call.error)}) and no later call of it "
                        "succeeded"
                    ),
                )
            )
        if per_name[name] <= repeated_limit:
            continue
        key = (name, _canonical(call.arguments))
        count = seen.get(key, 0) + 1
        seen[key] = count
        if count == repeated_limit + 1:
            out.append(
                Violation(
                    rule="repeated_call",
                    turn=i,
                    tool_call=k,
                    message=(
                        f"{name} called {count} times with the same arguments "
                        f"(limit {repeated_limit})"
                    ),
                )
            )
    return out


def learned_violations(
    conversation: Conversation,
    *,
    declared: Mapping[str, PolicyTool] | None = None,
    repeated_limit: int = DEFAULT_REPEATED_CALL_LIMIT,
) -> list[list[Violation]]:
    """The learned checks' violations of each turn (one list per turn, in order).

    Runs on every scored conversation, so the common case is decided inline: a turn
    with nothing declared, no failed call and at most `repeated_limit` calls can
    violate nothing. Schema validation shares one time limit per conversation."""
    with time_limit():
        return _learned_violations(conversation, declared, repeated_limit)


def _learned_violations(
    conversation: Conversation,
    declared: Mapping[str, PolicyTool] | None,
    repeated_limit: int,
) -> list[list[Violation]]:
    out: list[list[Violation]] = []
    for i, turn in enumerate(conversation.turns):
        calls = turn.tool_calls
        if (
            declared is None
            and len(calls) <= repeated_limit
            and turn.offered_tools is None
            and not turn.tool_schemas
        ):
            for call in calls:
                if call.error is not None:
                    break
            else:
                out.append([])
                continue
        out.append(_turn_violations(i, turn, declared, repeated_limit))
    return out
