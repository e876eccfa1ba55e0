"""Whether reference files may use the `command` grader (docs/graders.md, "command").

A `command` grader runs a program with the privileges of whoever evaluates: the
collector's user for `tracepass serve`, which hot-reloads reference folders that other
people may be able to write. So it is off unless the operator turns it on where the
reference folder cannot: `evaluation.allow_command_graders: true` in the collector
config, or `--allow-command-graders` for the offline commands. Loading a reference that
uses one while off is a load error at its `type` (file:line), never a silent skip.

The switch is a context variable set around one load (`load_reference_sets(...,
allow_command_graders=...)`): the schema checks deep inside the loader read it without
every parser passing it along.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = [
    "COMMAND_GRADERS_OFF",
    "command_graders_allowed",
    "command_graders_are_allowed",
]

COMMAND_GRADERS_OFF = (
    "command graders are off: they run programs with the evaluating process's privileges "
    "(the collector's user); enable them with `evaluation.allow_command_graders: true` in "
    "the collector config, or --allow-command-graders for tracepass evaluate / references "
    "validate / probe"
)

_allowed: ContextVar[bool] = ContextVar("tracepass_allow_command_graders", default=False)


@contextmanager
def command_graders_allowed(allowed: bool = True) -> Iterator[None]:
    token = _allowed.set(allowed)
    try:
        yield
    finally:
        _allowed.reset(token)


def command_graders_are_allowed() -> bool:
    return _allowed.get()
