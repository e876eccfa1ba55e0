"""Which evaluation core runs: the compiled kernels or the pure-Python reference.

The compiled core (`tracepass._evaluator_core`, the optional distribution
`tracepass-evaluator-core` built from `evaluator/native/` by `make native`) computes
parts of scoring natively. The pure-Python modules stay the reference implementation
(the equality tests compare the two on generated and corpus input) and the fallback
where the module is not installed. This module is the one place that decides:

* ``TRACEPASS_CORE=python`` — never use the compiled core;
* ``TRACEPASS_CORE=native`` — use it, and fail at import when it is missing or stale;
* unset (or ``auto``) — use it when it is importable and speaks this interface (`API`).

Callers never see which path ran: a kernel either returns exactly what the Python code
returns or declines (None), and the Python code then runs. ``tracepass --version``
prints `core_description()`.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence
from types import ModuleType
from typing import Any, Literal

from tracepass.evaluator.models import ExpectedTool

__all__ = [
    "API",
    "ENV",
    "CoreSelectionError",
    "active_core",
    "core_description",
    "native_module",
    "native_turn",
]

ENV = "TRACEPASS_CORE"
API = 1
"""The kernel interface this code calls (`tracepass._evaluator_core.API`)."""
_MODULE = "tracepass._evaluator_core"


class CoreSelectionError(ImportError):
    """`TRACEPASS_CORE` names an unknown core, or forces a native core that is missing."""


def _select() -> tuple[ModuleType | None, str]:
    raw = os.environ.get(ENV, "")
    choice = raw.strip().lower()
    if choice not in ("", "auto", "python", "native"):
        raise CoreSelectionError(f"{ENV}={raw!r}: expected 'python', 'native' or 'auto'")
    if choice == "python":
        return None, f"python ({ENV}=python)"
    try:
        module = importlib.import_module(_MODULE)
    except ImportError as exc:
        if choice == "native":
            raise CoreSelectionError(
                f"{ENV}=native but the compiled core is not installed ({exc}); "
                "build it with `make native` (needs cargo)"
            ) from exc
        return None, "python (compiled core not installed)"
    found = getattr(module, "API", None)
    if found != API:
        if choice == "native":
            raise CoreSelectionError(
                f"{ENV}=native but {_MODULE} speaks interface {found!r}, not {API}: "
                "rebuild it with `make native`"
            )
        return None, f"python (compiled core is stale: interface {found!r}, not {API})"
    return module, f"native (tracepass-evaluator-core {module.__version__})"


_NATIVE, _DESCRIPTION = _select()


def native_module() -> ModuleType | None:
    """The compiled core when it is the active one, else None."""
    return _NATIVE


def active_core() -> Literal["native", "python"]:
    return "python" if _NATIVE is None else "native"


def core_description() -> str:
    """``native (tracepass-evaluator-core 0.1.0)`` or ``python (why)``."""
    return _DESCRIPTION


def native_turn(expected: Sequence[ExpectedTool], sequence_matters: bool) -> Any | None:
    """The compiled form of one reference turn's expected calls (pairing, argument
    matching, selection / parameters / sequence: `tool_correctness.score_turn`), or None
    when the native core is off or some matcher is not one it implements (regex,
    custom callables: those turns are scored in Python)."""
    if _NATIVE is None or not expected:
        return None
    turn: Any = _NATIVE.NativeTurn.build(
        [t.name for t in expected],
        [t.arguments for t in expected],
        [t.argument_match for t in expected],
        [t.abs_tol for t in expected],
        [t.rel_tol for t in expected],
        [t.agent for t in expected],
        sequence_matters,
    )
    return turn
