"""A JSON Schema of a tool function's parameters, from its signature and type hints.

Recorded once per decorated function (not per call) in `tracepass.tool.parameters_schema`
on every tool span, so the collector can check the arguments the model passed against
what the tool declares (the `arguments_schema` learned check) without any
configuration. Only what the hints say for certain becomes a constraint: an annotation
this module does not understand is an unconstrained property, never a guess.
"""

from __future__ import annotations

import inspect
import json
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tracepass.instrumentation._binding import TOOL_CALL_ID_KWARG

__all__ = ["parameters_schema", "parameters_schema_json"]

_P = inspect.Parameter
_SCALARS: dict[Any, dict[str, Any]] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    type(None): {"type": "null"},
}


def _type_schema(hint: Any, depth: int = 0) -> dict[str, Any]:
    if depth > 8 or hint is Any or hint is inspect.Parameter.empty:
        return {}
    if hint in _SCALARS:
        return dict(_SCALARS[hint])
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Union or origin is types.UnionType:
        options = [_type_schema(a, depth + 1) for a in args]
        return {} if any(not o for o in options) else {"anyOf": options}
    if origin is typing.Literal:
        return {"enum": list(args)}
    if hint in (list, tuple, set, frozenset) or origin in (list, tuple, set, frozenset, Sequence):
        out: dict[str, Any] = {"type": "array"}
        if args and origin is not tuple:
            items = _type_schema(args[0], depth + 1)
            if items:
                out["items"] = items
        return out
    if hint is dict or origin in (dict, Mapping):
        return {"type": "object"}
    return {}


def parameters_schema(fn: Callable[..., Any]) -> dict[str, Any] | None:
    """`{"type": "object", "properties": …, "required": […]}` for `fn`'s named
    parameters, or None when it has no inspectable signature. A `**kwargs` parameter
    allows other properties; `*args`, the receiver and the tool-call-id are left out."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # unresolvable forward references: the names still count
        hints = {}
    properties: dict[str, Any] = {}
    required: list[str] = []
    extra = False
    params = list(signature.parameters.values())
    if params and params[0].name in ("self", "cls"):
        params = params[1:]
    for p in params:
        if p.kind is _P.VAR_KEYWORD:
            extra = True
            continue
        if p.kind is _P.VAR_POSITIONAL or p.name == TOOL_CALL_ID_KWARG:
            continue
        properties[p.name] = _type_schema(hints.get(p.name, p.annotation))
        if p.default is _P.empty:
            required.append(p.name)
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    if not extra:
        schema["additionalProperties"] = False
    return schema


def parameters_schema_json(fn: Callable[..., Any]) -> str | None:
    schema = parameters_schema(fn)
    return None if schema is None else json.dumps(schema, separators=(",", ":"))
