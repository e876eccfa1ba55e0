"""Mapping a call's positional/keyword arguments to parameter names, cheaply.

`inspect.Signature.bind` costs several microseconds per call, more than the span itself,
so the parameter layout is analysed once at decoration time and the common case (no
`*args`/`**kwargs` in the signature) is a `zip`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, Final

TOOL_CALL_ID_KWARG: Final = "tool_call_id"

_P = inspect.Parameter
_SIMPLE_KINDS = (_P.POSITIONAL_ONLY, _P.POSITIONAL_OR_KEYWORD, _P.KEYWORD_ONLY)


class ArgumentBinder:
    """Binds only the arguments actually passed (defaults are not filled in): that is
    what the model asked for, and what a reference's expected arguments describe."""

    __slots__ = ("accepts_call_id", "fast", "pos_names", "signature", "skip")

    def __init__(self, fn: Callable[..., Any]) -> None:
        try:
            signature: inspect.Signature | None = inspect.signature(fn)
        except (TypeError, ValueError):  # some builtins and C callables have none
            signature = None
        self.signature = signature
        params = list(signature.parameters.values()) if signature is not None else []
        names = {p.name for p in params}
        # Methods: the receiver is not an argument of the tool call.
        self.skip: str | None = None
        if params and params[0].name in ("self", "cls") and params[0].kind in _SIMPLE_KINDS[:2]:
            self.skip = params[0].name
        self.fast = signature is not None and all(p.kind in _SIMPLE_KINDS for p in params)
        self.pos_names = tuple(p.name for p in params if p.kind in _SIMPLE_KINDS[:2])
        self.accepts_call_id = TOOL_CALL_ID_KWARG in names or any(
            p.kind is _P.VAR_KEYWORD for p in params
        )

    def bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        if self.fast and len(args) <= len(self.pos_names):
            bound = dict(zip(self.pos_names, args, strict=False))
            if kwargs:
                bound.update(kwargs)
        else:
            bound = self._slow_bind(args, kwargs)
        if self.skip is not None:
            bound.pop(self.skip, None)
        bound.pop(TOOL_CALL_ID_KWARG, None)
        return bound

    def _slow_bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        if self.signature is None:
            return {"args": list(args), "kwargs": dict(kwargs)}
        try:
            ba = self.signature.bind_partial(*args, **kwargs)
        except TypeError:
            # The call itself will fail the same way; still record what was passed.
            return {"args": list(args), "kwargs": dict(kwargs)}
        bound: dict[str, Any] = {}
        for name, value in ba.arguments.items():
            kind = self.signature.parameters[name].kind
            if kind is _P.VAR_KEYWORD:
                bound.update(value)  # flatten: the caller passed these by name
            elif kind is _P.VAR_POSITIONAL:
                bound[name] = list(value)
            else:
                bound[name] = value
        return bound
