"""The `fair-forge` profile: Fair Forge 3.0.0's published tool-correctness definitions, so
users migrating from it get the same numbers.

Reproduced as published: set-Jaccard selection over tool *names*, per-key parameter
credit over the union of keys (Python ``==`` semantics, a key absent on one side
compares as None), step-index sequence, utilization from the declared
`final_answer_uses_tools` flag, and an unnormalized weighted sum.

Where Fair Forge's code contradicts its paper we follow the paper (each case is listed in
docs/fair-forge.md):

* the i-th expected call of a name is compared with the i-th actual call of that name,
  not with the first one (Fair Forge's parameter loop always uses ``used_list[0]``);
* a turn that expected tools but called none scores 0 on every dimension instead of
  None (which silently exempted it from tool checking);
* ``parameters: null`` means "arguments not checked" (1.0 when the tool was called)
  instead of crashing;
* tool correctness counts in turn correctness (the scoring module applies this).

Step indexes are the 1-based positions of calls in their turn (importers keep the
dataset's `step` order).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tracepass.evaluator.models import ReferenceTurn, ToolCall, ToolCorrectness
from tracepass.evaluator.toolcorrectness import make_tool_correctness

__all__ = ["fair_forge_parameter_credit", "fair_forge_tool_correctness"]


def fair_forge_parameter_credit(expected: dict[str, Any], actual: dict[str, Any]) -> float:
    """Fair Forge's per-call parameter score: 1.0 if the dicts are equal, else the share
    of keys in the union whose values are equal (missing keys read as None)."""
    if expected == actual:
        return 1.0
    keys = set(expected) | set(actual)
    if not keys:
        return 0.0
    return sum(1 for k in keys if expected.get(k) == actual.get(k)) / len(keys)


def fair_forge_tool_correctness(
    calls: Sequence[ToolCall],
    turn: ReferenceTurn,
    *,
    declared: bool | None,
    weights: tuple[float, float, float, float] = (0.25, 0.25, 0.25, 0.25),
    tool_threshold: float = 1.0,
) -> ToolCorrectness | None:
    """`weights` are used as given (Fair Forge does not normalize them)."""
    expected = turn.expected_tools
    if expected is None or (not expected and not calls):
        return None
    if expected and not calls:
        s = p = q = u = 0.0
    else:
        used_names = {c.name for c in calls}
        exp_names = {t.name for t in expected}
        union = used_names | exp_names
        s = len(used_names & exp_names) / len(union) if union else 1.0

        used_by: dict[str, list[int]] = {}
        for pos, c in enumerate(calls):
            used_by.setdefault(c.name, []).append(pos)
        exp_by: dict[str, list[int]] = {}
        for j, t in enumerate(expected):
            exp_by.setdefault(t.name, []).append(j)

        params: list[float] = []
        steps: list[float] = []
        for name, e_idx in exp_by.items():
            u_idx = used_by.get(name)
            if not u_idx:
                params.append(0.0)
                steps.append(0.0)
                continue
            for rank, j in enumerate(e_idx):
                i = u_idx[rank] if rank < len(u_idx) else None
                exp_args = expected[j].arguments
                if i is None:
                    params.append(0.0)
                elif exp_args is None:
                    params.append(1.0)
                else:
                    params.append(fair_forge_parameter_credit(exp_args, calls[i].arguments))
                # step = 1-based position; expected step j + 1, actual step i + 1
                steps.append(1.0 if i is not None and i == j else 0.0)
        p = sum(params) / len(params) if params else 0.0
        q = (sum(steps) / len(steps) if steps else 0.0) if turn.tool_sequence_matters else 1.0
        u = 1.0 if declared else 0.0
    return make_tool_correctness(s, p, q, u, weights, tool_threshold)
