"""The `fair-forge` profile: Fair Forge 3.0.0's published tool-correctness definitions, so
users migrating from it get the same numbers.

Reproduced as published: set-Jaccard selection over tool *names*, per-key parameter
credit over the union of keys (Python ``==`` semantics, a key absent on one side
compares as None), step-index sequence, utilization from the declared
`final_answer_uses_tools` flag, and an unnormalized weighted sum.

Where Fair Forge's code contradicts its paper we follow the paper (each case is listed in
docs/fair-forge.md):

* where a tool name repeats, the calls of each name are paired one-to-one by best
  argument fit — the default profile's assignment (`toolcorrectness.assign_calls`) with
  Fair Forge's parameter credit as the score — not every expected call with the first
  actual call (Fair Forge's parameter loop always uses ``used_list[0]``). Parameters are
  scored over that pairing (an unpaired expected call 0) and sequence compares each
  expected call's step with its *paired* call's step, so a missing call costs parameters
  and a swapped order costs sequence. Where no name repeats the pairing is Fair Forge's
  own (each name's only call) and so are the numbers;
* a turn that expected tools but called none scores 0 on every dimension instead of
  None (which silently exempted it from tool checking);
* ``parameters: null`` means "arguments not checked" (1.0 when the tool was called)
  instead of crashing;
* tool correctness counts in turn correctness (the scoring module applies this).

Step indexes are the 1-based positions of calls in their turn (importers keep the
dataset's `step` order).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tracepass.evaluator.models import ExpectedTool, ReferenceTurn, ToolCall, ToolCorrectness
from tracepass.evaluator.scoring.argmatch import ArgumentMatcher
from tracepass.evaluator.scoring.tool_correctness import (
    CompiledTurn,
    assign_calls,
    compile_turn,
    make_tool_correctness,
)

__all__ = ["fair_forge_matcher", "fair_forge_parameter_credit", "fair_forge_tool_correctness"]


def fair_forge_parameter_credit(expected: Mapping[str, Any], actual: Mapping[str, Any]) -> float:
    """Fair Forge's per-call parameter score: 1.0 if the dicts are equal, else the share
    of keys in the union whose values are equal (missing keys read as None)."""
    if expected == actual:
        return 1.0
    keys = set(expected) | set(actual)
    if not keys:
        return 0.0
    return sum(1 for k in keys if expected.get(k) == actual.get(k)) / len(keys)


def fair_forge_matcher(tool: ExpectedTool) -> ArgumentMatcher:
    """`fair_forge_parameter_credit` against `tool`'s arguments, as an argument matcher
    for the shared call pairing; null expected parameters are not checked (1.0)."""
    expected = tool.arguments
    if expected is None:
        return _not_checked
    return lambda actual: fair_forge_parameter_credit(expected, actual)


def _not_checked(actual: Mapping[str, Any]) -> float:
    return 1.0


def fair_forge_tool_correctness(
    calls: Sequence[ToolCall],
    turn: ReferenceTurn,
    *,
    declared: bool | None,
    weights: tuple[float, float, float, float] = (0.25, 0.25, 0.25, 0.25),
    tool_threshold: float = 1.0,
    compiled: CompiledTurn | None = None,
    names: list[str] | None = None,
) -> ToolCorrectness | None:
    """`weights` are used as given (Fair Forge does not normalize them). `compiled`:
    ``compile_turn(turn, fair_forge_matcher)``, when the caller keeps it per reference
    turn (the evaluator does; compiling it per scored turn was a fifth of the scoring).
    `names`: ``called_names(calls, compiled)`` when the caller has it already."""
    expected = turn.expected_tools
    if expected is None or (not expected and not calls):
        return None
    if expected and not calls:
        s = p = q = u = 0.0
    else:
        if compiled is None:
            compiled = compile_turn(turn, fair_forge_matcher)
        assert compiled is not None  # expected_tools is not None
        used_names = {c.name for c in calls}
        exp_names = compiled.by_name.keys()  # the expected names, as a set
        union = len(used_names | exp_names)
        s = len(used_names & exp_names) / union if union else 1.0

        # Per expected call, in expected order: its paired call's parameter credit (an
        # unpaired expected call 0: it costs parameters and sequence) and whether that
        # call's step (1-based position) equals the expected one. Summing the credits in
        # expected order keeps the float sum Fair Forge's.
        n = len(expected)
        credits = [0.0] * n
        in_step = 0
        for i, j, credit in assign_calls(calls, compiled, names):
            credits[j] = credit
            if i == j:
                in_step += 1
        p = sum(credits) / n if n else 0.0
        q = (in_step / n if n else 0.0) if turn.tool_sequence_matters else 1.0
        u = 1.0 if declared else 0.0
    return make_tool_correctness(s, p, q, u, weights, tool_threshold)
