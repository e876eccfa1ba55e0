"""Whether reference files may name code: the one trust rule (docs/references.md,
"Code in reference files").

Two things a reference file can name run as whoever evaluates: a `command` grader runs
a program, and an `argument_match` that is not a built-in matcher (`package.module:fn`)
imports a module and calls a function with span-controlled values. That is the
collector's user for `tracepass serve`, which hot-reloads reference folders other people
may be able to write. So both are off unless the operator turns them on where the
reference folder cannot: `evaluation.allow_command_graders: true` in the collector
config, or `--allow-command-graders` for the offline commands (the switch kept its first
name; it covers all code a reference file names). A reference naming code while off is a
load error at the field (file:line), raised before anything is imported or run.

An approved reference (the API's and UI's "approve", with or without an edit) may never
name code, whatever the switch says: the person approving holds a write token, not the
operator's trust (`no_reference_code_in_approvals`).

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
    "no_reference_code_in_approvals",
    "reference_code_refusal",
]

_OFF = (
    "{what} runs code with the evaluating process's privileges (the collector's user); "
    "code named by reference files is off: enable it with "
    "`evaluation.allow_command_graders: true` in the collector config, or "
    "--allow-command-graders for tracepass evaluate / references validate / probe"
)
_IN_APPROVAL = (
    "{what} runs code: an approved reference may not name code (a command grader or an "
    "argument_match callable), whatever the collector allows; write such a reference "
    "into the reference directory yourself"
)
COMMAND_GRADERS_OFF = "command graders are off: " + _OFF.format(what="a command grader")

_allowed: ContextVar[bool] = ContextVar("tracepass_allow_command_graders", default=False)
_refusal: ContextVar[str] = ContextVar("tracepass_reference_code_refusal", default=_OFF)


@contextmanager
def command_graders_allowed(allowed: bool = True) -> Iterator[None]:
    token = _allowed.set(allowed)
    try:
        yield
    finally:
        _allowed.reset(token)


@contextmanager
def no_reference_code_in_approvals() -> Iterator[None]:
    """Around the validation of an approved reference: code is refused, with a reason
    that does not suggest the switch."""
    allowed, refusal = _allowed.set(False), _refusal.set(_IN_APPROVAL)
    try:
        yield
    finally:
        _refusal.reset(refusal)
        _allowed.reset(allowed)


def command_graders_are_allowed() -> bool:
    return _allowed.get()


def reference_code_refusal(what: str) -> str | None:
    """None when code named by a reference file may run; else why not, for `what`
    ("a command grader", "argument_match 'pkg:fn'")."""
    if _allowed.get():
        return None
    template = _refusal.get()
    message = template.format(what=what)
    off = template is _OFF and what == "a command grader"
    return ("command graders are off: " + message) if off else message
