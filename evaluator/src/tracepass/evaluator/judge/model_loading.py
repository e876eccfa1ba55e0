"""Resolve a `module:attr` judge spec to a langchain-core chat model.

Shared by `tracepass serve` (config `evaluation.judge`) and the CLI's `--judge`, so both
accept the same specs and fail with the same precise messages. The attribute may be a
`BaseChatModel` instance or a zero-argument factory returning one (factories let users
build models from environment variables at start-up).
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any


class JudgeSpecError(ValueError):
    """A judge spec that cannot be used; the message says what and why."""


def resolve_chat_model(spec: str) -> Any:
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise JudgeSpecError(f"{spec!r}: expected module:attr (e.g. mypkg.judges:make_judge)")
    # Console scripts do not put the working directory on sys.path; a judge defined in
    # the user's project (`judges:make`) must import as it would with `python -m`.
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise JudgeSpecError(f"{spec!r}: cannot import module {module_name!r}: {exc}") from exc
    target: Any = module
    for part in attr.split("."):
        if not hasattr(target, part):
            raise JudgeSpecError(f"{spec!r}: module {module_name!r} has no attribute {attr!r}")
        target = getattr(target, part)
    from langchain_core.language_models import BaseChatModel

    if isinstance(target, BaseChatModel):
        return target
    if not callable(target):
        raise JudgeSpecError(
            f"{spec!r}: {type(target).__name__} is not a BaseChatModel or a factory"
        )
    try:
        made = target()
    except Exception as exc:  # a broken factory is bad configuration, not a crash
        raise JudgeSpecError(f"{spec!r}: factory raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(made, BaseChatModel):
        raise JudgeSpecError(
            f"{spec!r}: factory returned {type(made).__name__}, expected a langchain-core BaseChatModel"
        )
    return made
