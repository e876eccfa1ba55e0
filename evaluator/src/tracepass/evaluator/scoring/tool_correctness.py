"""Per-turn tool correctness: selection, parameters, sequence, utilization.

The four dimensions are Fair Forge's; the definitions are repaired (docs/metrics.md has
the formulas and every edge case):

* actual and expected calls are paired by an **optimal one-to-one assignment** — name
  equality first, argument score as the tie-break — so the same tool called twice is two
  calls each compared with its own counterpart (Fair Forge compares every expected call
  of a name with the *first* actual call of that name);
* selection is a multiset Jaccard index, so calling a tool three times when it was
  expected once costs something;
* sequence is the longest run of paired calls in the expected relative order over the
  number of expected calls, so one extra call at the start does not zero the score;
* a turn that was expected to call tools and called none scores 0 on every dimension
  (Fair Forge reports None and the turn silently escapes tool checking).

Pairing decomposes by tool name: calls of different names never pair, so each name is
an independent (usually 1×1) assignment problem and scipy is only needed when a name
occurs more than once on both sides. The usual turn (expected names distinct, each
called at most once) skips the grouping altogether: a dict lookup per call.
"""

from __future__ import annotations

import json
import math
import re
from bisect import bisect_left
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import permutations
from typing import Any, Literal

from tracepass.evaluator.models import (
    ExpectedTool,
    ReferenceTurn,
    ToolCall,
    ToolCorrectness,
    construct_unchecked,
)
from tracepass.evaluator.native_core import native_turn
from tracepass.evaluator.scoring.argmatch import MATCHERS, ArgumentMatcher, compile_matcher

__all__ = [
    "DEFAULT_WEIGHTS",
    "EPSILON",
    "CompiledTurn",
    "Pair",
    "UtilizationMode",
    "assign_calls",
    "called_names",
    "compile_turn",
    "detect_utilization",
    "lis_length",
    "make_tool_correctness",
    "normalize_weights",
    "score_turn",
    "tool_correctness",
]

UtilizationMode = Literal["auto", "declared", "detected"]
EPSILON = 1e-9
"""Slack for ``overall >= tool_threshold``: 0.1 + 0.2 style rounding must not fail a
turn whose four dimensions are all perfect under non-dyadic weights."""
DEFAULT_WEIGHTS: tuple[float, float, float, float] = (0.25, 0.25, 0.25, 0.25)

Pair = tuple[int, int, float]
"""(actual index, expected index, argument score)."""


@dataclass(frozen=True, slots=True)
class CompiledTurn:
    """The expected side of one turn, prepared once per reference."""

    expected: tuple[ExpectedTool, ...]
    matchers: tuple[ArgumentMatcher, ...]
    by_name: dict[str, tuple[int, ...]]
    sequence_matters: bool
    # name → expected index when every expected name is distinct, else None
    unique: dict[str, int] | None = None
    # every matcher is a built-in one (no side effects: calls may be skipped)
    pure: bool = False
    # some expected call names the agent that must make it (multi-agent references)
    checks_agent: bool = False
    # called name → the expected name it stands for, when it is the plugin-qualified
    # (or bare) form of exactly one expected name; filled on first sight (see `_alias`)
    aliases: dict[str, str | None] = field(default_factory=dict)
    # the compiled core's form of this turn (`native_core.native_turn`), None when the
    # Python code below scores it
    native: Any = None


def compile_turn(
    turn: ReferenceTurn, matcher: Callable[[ExpectedTool], ArgumentMatcher] | None = None
) -> CompiledTurn | None:
    """None when the turn does not check tools (``expected_tools: null``).

    `matcher` replaces the reference's own argument matchers (`compile_matcher`) so a
    profile with another argument score pairs calls with the same assignment code; the
    matchers it builds must be side-effect free (calls may be skipped)."""
    if turn.expected_tools is None:
        return None
    expected = turn.expected_tools
    by_name: dict[str, list[int]] = {}
    for j, t in enumerate(expected):
        by_name.setdefault(t.name, []).append(j)
    return CompiledTurn(
        expected=expected,
        matchers=tuple((matcher or compile_matcher)(t) for t in expected),
        by_name={k: tuple(v) for k, v in by_name.items()},
        sequence_matters=turn.tool_sequence_matters,
        unique={k: v[0] for k, v in by_name.items()} if len(by_name) == len(expected) else None,
        pure=matcher is not None
        or all(t.arguments is None or t.argument_match in MATCHERS for t in expected),
        checks_agent=any(t.agent is not None for t in expected),
        native=None if matcher is not None else native_turn(expected, turn.tool_sequence_matters),
    )


# What joins a plugin, toolkit or server name to a tool's name in the frameworks seen:
# Semantic Kernel `events-search_events`, MCP `server__tool` / `server.tool`, `ns:tool`.
QUALIFIERS = ("-", ".", ":", "/", "__")


def _alias(name: str, turn: CompiledTurn) -> str | None:
    """The expected name a called `name` stands for when it is not one itself: the one
    expected name it qualifies (`plugin-name` for `name`) or that qualifies it (the call
    bare, the reference qualified). None when no expected name or several match."""
    aliases = turn.aliases
    if name in aliases:
        return aliases[name]
    found = [
        e
        for e in turn.by_name
        if any(name.endswith(q + e) or e.endswith(q + name) for q in QUALIFIERS)
    ]
    alias = found[0] if len(found) == 1 else None
    if len(aliases) < 1024:  # bounded: names come from spans
        aliases[name] = alias
    return alias


def called_names(calls: Sequence[ToolCall], turn: CompiledTurn) -> list[str]:
    """Each call's name as the reference spells it (see `_alias`)."""
    by_name = turn.by_name
    names: list[str] = []
    for c in calls:
        name = c.name
        if name not in by_name:
            name = _alias(name, turn) or name
        names.append(name)
    return names


def normalize_weights(
    selection: float, parameters: float, sequence: float, utilization: float
) -> tuple[float, float, float, float]:
    """Validate (finite, non-negative, not all zero) and scale to sum 1."""
    ws = (selection, parameters, sequence, utilization)
    names = ("selection", "parameters", "sequence", "utilization")
    for name, w in zip(names, ws, strict=True):
        if not math.isfinite(w) or w < 0:
            raise ValueError(f"tool weight {name!r} must be a finite number >= 0, got {w!r}")
    total = sum(ws)
    if total <= 0:
        raise ValueError("tool weights must not all be zero")
    return (ws[0] / total, ws[1] / total, ws[2] / total, ws[3] / total)


# --------------------------------------------------------------------------- pairing


def _group_assign(
    a_idx: Sequence[int], e_idx: Sequence[int], scores: list[list[float]]
) -> Iterator[Pair]:
    """Maximum-weight one-to-one pairing inside one name group (min(m, n) pairs).

    Ties are broken toward order-preserving pairs (a tiny penalty on the rank distance)
    so two identical calls pair first-with-first, which keeps `sequence` meaningful."""
    m, n = len(a_idx), len(e_idx)
    if m == 1:
        row = scores[0]
        best = max(range(n), key=lambda j: (row[j], -j))
        yield a_idx[0], e_idx[best], row[best]
        return
    if n == 1:
        best = max(range(m), key=lambda i: (scores[i][0], -i))
        yield a_idx[best], e_idx[0], scores[best][0]
        return
    eps = 1e-9 / (m + n)
    if m * n <= 16:  # tiny groups: enumerating injections beats scipy's call overhead
        yield from _small_assign(a_idx, e_idx, scores, eps)
        return
    from scipy.optimize import linear_sum_assignment

    weights = [[scores[i][j] - eps * abs(i - j) for j in range(n)] for i in range(m)]
    rows, cols = linear_sum_assignment(weights, maximize=True)
    for i, j in zip(rows.tolist(), cols.tolist(), strict=True):
        yield a_idx[i], e_idx[j], scores[i][j]


def _small_assign(
    a_idx: Sequence[int], e_idx: Sequence[int], scores: list[list[float]], eps: float
) -> Iterator[Pair]:
    """Exhaustive maximum-weight matching of the smaller side into the larger one
    (same objective and tie-break as the scipy path)."""
    m, n = len(a_idx), len(e_idx)
    best_total = -1.0
    best: tuple[int, ...] = ()
    if m <= n:
        for perm in permutations(range(n), m):
            total = sum(scores[i][j] - eps * abs(i - j) for i, j in enumerate(perm))
            if total > best_total:
                best_total, best = total, perm
        for i, j in enumerate(best):
            yield a_idx[i], e_idx[j], scores[i][j]
    else:
        for perm in permutations(range(m), n):
            total = sum(scores[i][j] - eps * abs(i - j) for j, i in enumerate(perm))
            if total > best_total:
                best_total, best = total, perm
        for j, i in enumerate(best):
            yield a_idx[i], e_idx[j], scores[i][j]


def assign_calls(
    calls: Sequence[ToolCall], turn: CompiledTurn, names: list[str] | None = None
) -> list[Pair]:
    """Pairs sorted by actual index. Raises `ArgumentMatchError` from custom matchers.

    A call pairs with an expected call of its name, or of the name it is the plugin-
    qualified form of (`_alias`); where the expected call names an `agent`, only a call
    made by that agent pairs with it (`_agents_agree`). `names`: ``called_names(calls,
    turn)`` when the caller has it already (the evaluator does, for the trajectory)."""
    pairs = _assign(calls, turn, called_names(calls, turn) if names is None else names)
    if turn.checks_agent:
        expected = turn.expected
        pairs = [p for p in pairs if _agents_agree(calls[p[0]], expected[p[1]])]
    return pairs


def _agents_agree(call: ToolCall, expected: ExpectedTool) -> bool:
    return expected.agent is None or call.agent == expected.agent


def _assign(calls: Sequence[ToolCall], turn: CompiledTurn, names: list[str]) -> list[Pair]:
    unique = turn.unique
    if unique is not None:
        # Expected names distinct: if no expected name is called twice either, every
        # group is 1×1 and the pairing is a lookup per call (matchers then run in call
        # order, which is also the general path's order in that case).
        hits = [(i, unique[n]) for i, n in enumerate(names) if n in unique]
        if len({j for _, j in hits}) == len(hits):
            matchers = turn.matchers
            return [(i, j, matchers[j](calls[i].arguments)) for i, j in hits]
    by_name = turn.by_name
    groups: dict[str, list[int]] = {}
    for i, n in enumerate(names):
        if n in by_name:
            groups.setdefault(n, []).append(i)
    pairs: list[Pair] = []
    matchers = turn.matchers
    for name, a_idx in groups.items():
        e_idx = by_name[name]
        if len(a_idx) == 1 and len(e_idx) == 1:
            i, j = a_idx[0], e_idx[0]
            pairs.append((i, j, matchers[j](calls[i].arguments)))
            continue
        if turn.pure:
            # Repeated tool, called as expected in the expected order: if the t-th call
            # fully matches the t-th expected call for every t, that pairing has the
            # maximum score and zero order penalty, so it is the unique optimum every
            # branch of `_group_assign` returns. Only for built-in (side-effect-free)
            # matchers, since it skips evaluating the off-diagonal pairs.
            diag = [
                (i, j, matchers[j](calls[i].arguments)) for i, j in zip(a_idx, e_idx, strict=False)
            ]
            if all(x[2] == 1.0 for x in diag):
                pairs.extend(diag)
                continue
        scores = [[matchers[j](calls[i].arguments) for j in e_idx] for i in a_idx]
        pairs.extend(_group_assign(a_idx, e_idx, scores))
    if len(pairs) > 1:
        pairs.sort()
    return pairs


def lis_length(seq: Sequence[int]) -> int:
    """Length of the longest strictly increasing subsequence (patience sorting)."""
    tails: list[int] = []
    for x in seq:
        k = bisect_left(tails, x)
        if k == len(tails):
            tails.append(x)
        else:
            tails[k] = x
    return len(tails)


# --------------------------------------------------------------------------- utilization

_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:,\d{3})*(?:\.\d+)?")
_MAX_LEAVES = 1000


def _numeric_text(s: str) -> float | None:
    """A result that is a number written as text ("5", "-3.5", "1,234"), as LangChain and
    most HTTP tools return them: compared as a number (so "5" is found in "2 + 3 = 5" and
    "32.4" in "$32.40"), never as a too-short substring."""
    if not s or s[0] not in "+-.0123456789" or len(s) > 40:
        return None
    try:
        x = float(s.replace(",", ""))
    except ValueError:
        return None
    return x if math.isfinite(x) else None


def _leaves(value: Any, out: list[Any]) -> None:
    if len(out) >= _MAX_LEAVES or value is None or isinstance(value, bool):
        return
    if isinstance(value, str):
        s = value.strip()
        if s[:1] in ("{", "[") and len(s) < 100_000:
            try:
                _leaves(json.loads(s), out)
                return
            except ValueError:
                pass
        number = _numeric_text(s)
        if number is not None:
            out.append(number)
        elif len(s) >= 3:  # "a", "ok", "no": far too likely to appear by chance
            out.append(s)
        return
    if isinstance(value, int | float):
        if math.isfinite(value):
            out.append(value)
        return
    if isinstance(value, Mapping):
        for v in value.values():
            _leaves(v, out)
        return
    if isinstance(value, list | tuple):
        for v in value:
            _leaves(v, out)


def detect_utilization(answer: str | None, calls: Sequence[ToolCall]) -> float | None:
    """1.0 if some result value of a successful call appears in the answer, 0.0 if none
    does, None when the calls recorded no usable result value (nothing to look for).

    Strings (≥ 3 characters) match case-insensitively as substrings; numbers match any
    number written in the answer, allowing for the answer's rounding (32.4 matches
    "$32.40", 3.14159 matches "3.14") and thousands separators.

    The values are looked for call by call (the same first `_MAX_LEAVES` values as
    collecting them all first), so an answer that uses the first call's result costs
    one call's values, not every call's."""
    leaves: list[Any] = []
    looked = 0
    seen = _AnswerText(answer) if answer else None
    for c in calls:
        if c.error is not None:
            continue
        r = c.result
        s = r.strip() if type(r) is str else None
        if s is not None and len(leaves) < _MAX_LEAVES and s[:1] not in ("{", "["):
            number = _numeric_text(s)  # the usual result: inline
            if number is not None:
                leaves.append(number)
            elif len(s) >= 3:
                leaves.append(s)
        else:
            _leaves(r, leaves)
        if seen is not None and len(leaves) > looked:
            if any(seen.contains(leaf) for leaf in leaves[looked:]):
                return 1.0
            looked = len(leaves)
    if not leaves:
        return None
    return 0.0


class _AnswerText:
    """An answer as `detect_utilization` searches it: case-folded and its numbers
    parsed, each once and only when first needed."""

    __slots__ = ("_answer", "_folded", "_numbers")

    def __init__(self, answer: str) -> None:
        self._answer = answer
        self._folded: str | None = None
        self._numbers: list[tuple[float, int]] | None = None

    def contains(self, leaf: Any) -> bool:
        if isinstance(leaf, str):
            if self._folded is None:
                self._folded = self._answer.casefold()
            return leaf.casefold() in self._folded
        numbers = self._numbers
        if numbers is None:
            numbers = self._numbers = []
            for m in _NUMBER.finditer(self._answer):
                text = m.group().replace(",", "")
                decimals = len(text) - text.index(".") - 1 if "." in text else 0
                numbers.append((float(text), decimals))
        for x, decimals in numbers:
            if math.isclose(leaf, x, rel_tol=1e-9, abs_tol=1e-12) or (
                decimals >= 1 and abs(leaf) >= 10.0 ** (-decimals) and round(leaf, decimals) == x
            ):
                return True
        return False


def _utilization(
    mode: UtilizationMode, declared: bool | None, answer: str | None, calls: Sequence[ToolCall]
) -> float:
    if mode == "declared" or (mode == "auto" and declared is not None):
        return 1.0 if declared else 0.0
    detected = detect_utilization(answer, calls)
    return 1.0 if detected is None else detected


# --------------------------------------------------------------------------- the score


_interned: dict[tuple[float, ...], ToolCorrectness] = {}
_INTERN_LIMIT = 4096


def make_tool_correctness(
    s: float, p: float, q: float, u: float, w: tuple[float, float, float, float], thr: float
) -> ToolCorrectness:
    """The ToolCorrectness of four dimension scores (selection, parameters, sequence,
    utilization): `overall` is their `w`-weighted sum as given (callers normalize the
    weights or not, per their definition) and `correct` is `overall >= thr` within
    EPSILON. Shared by every profile so they agree on how a result is assembled."""
    # Results are frozen value objects and take few distinct values (1.0 / 0.5 / 0.0 …),
    # so equal ones are shared rather than rebuilt on every turn. The four dimensions
    # are never -0.0 (ratios of non-negative counts and sums started at int 0), so float
    # equality of the key means identical output.
    key = (s, p, q, u, thr, *w)
    hit = _interned.get(key)
    if hit is not None:
        return hit
    overall = w[0] * s + w[1] * p + w[2] * q + w[3] * u
    made = construct_unchecked(
        ToolCorrectness,
        dict(
            selection=s,
            parameters=p,
            sequence=q,
            utilization=u,
            overall=overall,
            correct=overall >= thr - EPSILON,
        ),
    )
    if len(_interned) >= _INTERN_LIMIT:
        _interned.clear()
    _interned[key] = made
    return made


def tool_correctness(
    calls: Sequence[ToolCall],
    turn: CompiledTurn | None,
    *,
    answer: str | None,
    declared: bool | None,
    weights: tuple[float, float, float, float] = DEFAULT_WEIGHTS,
    tool_threshold: float = 1.0,
    utilization: UtilizationMode = "auto",
) -> ToolCorrectness | None:
    """Score one turn. `weights` must already be normalized (see `normalize_weights`).

    None when tools are not checked (`turn` is None) or when none were expected and none
    were called. Expected-but-none-called and none-expected-but-some-called both score 0
    on every dimension: the turn broke the reference's explicit tool contract."""
    if turn is None:
        return None
    return score_turn(calls, turn, answer, declared, weights, tool_threshold, utilization)[0]


def score_turn(
    calls: Sequence[ToolCall],
    turn: CompiledTurn,
    answer: str | None,
    declared: bool | None,
    weights: tuple[float, float, float, float],
    tool_threshold: float,
    utilization: UtilizationMode,
    names: list[str] | None = None,
) -> tuple[ToolCorrectness | None, int]:
    """`tool_correctness` plus the number of paired calls, which is also the size of the
    multiset intersection of called and expected names (each name pairs min(m, n)
    times), i.e. the trajectory's matched count by name; scoring reuses it. `names`:
    ``called_names(calls, turn)`` when the caller has it (see `assign_calls`)."""
    n_e = len(turn.expected)
    n_a = len(calls)
    if n_e == 0 or n_a == 0:
        if n_e == 0 and n_a == 0:
            return None, 0
        return make_tool_correctness(0.0, 0.0, 0.0, 0.0, weights, tool_threshold), 0
    # The compiled core computes the same four numbers, or declines (None).
    kernel = turn.native
    got = (
        None
        if kernel is None
        else kernel.score(calls, called_names(calls, turn) if names is None else names)
    )
    if got is not None:
        p, selection, parameters, sequence = got
    else:
        pairs = assign_calls(calls, turn, names)
        p = len(pairs)
        selection = p / (n_a + n_e - p)
        parameters = sum([x[2] for x in pairs]) / n_e
        if turn.sequence_matters:
            js = [x[1] for x in pairs]
            # expected indices are distinct: already sorted means the whole run is in order
            sequence = (p if js == sorted(js) else lis_length(js)) / n_e
        else:
            sequence = 1.0
    util = _utilization(utilization, declared, answer, calls)
    return make_tool_correctness(selection, parameters, sequence, util, weights, tool_threshold), p
