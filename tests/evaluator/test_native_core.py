"""The compiled evaluation core equals the pure-Python reference implementation.

`tracepass._evaluator_core` (evaluator/native) computes call pairing, argument matching
and the selection / parameters / sequence dimensions of `score_turn`; the Python modules
are the definition. Here both run on the same generated input and must agree exactly
(floats bit for bit, ToolCorrectness and whole stored rows equal): values with unicode,
nesting, 1 vs 1.0 vs True, NaN, infinities, -0.0 and 70-bit integers; turns with
repeated tools, aliases, agents and every matcher, passing and failing. Where the kernel
declines (objects that are not plain JSON, groups Python hands to scipy, regex and custom
matchers) the Python code runs, and the tests check the kernel declines only there.

Skipped, with the reason, where the compiled core is not built (no cargo): `make test`
then runs the Python path alone.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracepass.evaluator import native_core
from tracepass.evaluator.models import (
    Conversation,
    ExpectedTool,
    Reference,
    ReferenceTurn,
    ToolCall,
)
from tracepass.evaluator.scoring import tool_correctness as tc_module
from tracepass.evaluator.scoring.argmatch import deep_equal, match_arguments, numeric_equal
from tracepass.evaluator.scoring.evaluator import EvaluationConfig, Evaluator
from tracepass.evaluator.scoring.tool_correctness import (
    DEFAULT_WEIGHTS,
    called_names,
    compile_turn,
    score_turn,
)

try:
    import tracepass._evaluator_core as core  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - machines without cargo
    core = None

pytestmark = pytest.mark.skipif(
    core is None, reason="compiled core not built (`make native` needs cargo)"
)

# Generated inputs per run, over the three property tests (values, argument scores,
# turns): 10,000 by default; TRACEPASS_NATIVE_EXAMPLES raises it for a longer soak.
EXAMPLES = int(os.environ.get("TRACEPASS_NATIVE_EXAMPLES", "10000"))
CORPUS = Path(__file__).resolve().parents[1] / "frameworks" / "corpus"

# ---------------------------------------------------------------------------- values

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-3, max_value=3),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0.0, -0.0, 1.0, 2.0, 1.5, 1e-10, 1.0 + 1e-12, math.inf, -math.inf]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["", "a", "1", "True", "Paris", "París", "東京", "🙂", "e\u0301"]),
    st.text(max_size=6),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=4).map(tuple),
        st.dictionaries(st.sampled_from(["a", "b", "city", "ü", "1"]), inner, max_size=4),
    ),
    max_leaves=12,
)


def _twin(value: Any, draw: st.DrawFn) -> Any:
    """A value like `value` with some leaves swapped for their look-alikes (1 → 1.0 →
    True, "1", a nearby float), so pairs are often equal and often barely not."""
    if isinstance(value, dict):
        return {k: _twin(v, draw) for k, v in value.items()}
    if isinstance(value, list | tuple):
        out = [_twin(v, draw) for v in value]
        return tuple(out) if draw(st.booleans()) else out
    if draw(st.integers(0, 3)) != 0:
        return value
    if isinstance(value, bool):
        return draw(st.sampled_from([int(value), float(value), str(value)]))
    if isinstance(value, int):
        return draw(
            st.sampled_from([float(value) if abs(value) < 2**60 else value + 1, value, True])
        )
    if isinstance(value, float):
        if math.isfinite(value):
            return draw(
                st.sampled_from(
                    [value * (1 + 1e-12), value + 1e-10, int(value) if abs(value) < 1e18 else value]
                )
            )
        return value
    return value


@st.composite
def _value_pairs(draw: st.DrawFn) -> tuple[Any, Any]:
    a = draw(_values)
    b = _twin(a, draw) if draw(st.booleans()) else draw(_values)
    return a, b


@settings(max_examples=EXAMPLES * 3 // 10, deadline=None, suppress_health_check=list(HealthCheck))
@given(_value_pairs(), st.sampled_from([0.0, 1e-9, 0.5]), st.sampled_from([0.0, 1e-9, 0.1]))
def test_equalities_match_python(pair: tuple[Any, Any], abs_tol: float, rel_tol: float) -> None:
    a, b = pair
    assert core.deep_equal(a, b) == deep_equal(a, b)
    assert core.deep_equal(b, a) == deep_equal(b, a)
    try:
        expected = numeric_equal(a, b, abs_tol, rel_tol)
    except OverflowError:  # an integer beyond a double: Python raises, the kernel declines
        assert core.numeric_equal(a, b, abs_tol, rel_tol) is None
        return
    assert core.numeric_equal(a, b, abs_tol, rel_tol) == expected


class _Odd(dict[str, Any]):
    """Not a plain dict: its answers are its own, so the kernel must decline."""


def test_kernel_declines_objects_that_are_not_plain_json() -> None:
    class Num(int):
        pass

    assert core.deep_equal(1, Num(1)) is None
    assert core.deep_equal({"a": 1}, _Odd(a=1)) is None
    assert core.deep_equal(Num(1), 1) is None
    assert core.numeric_equal(2**1100, 1.0, 0.0, 1e-9) is None
    assert core.argument_score({"a": 1}, _Odd(a=1), "exact", 0.0, 1e-9) is None
    # ... and answers plain values whatever they hold
    assert core.deep_equal([1, {"x": (2.0, None)}], (1.0, {"x": [2, None]})) is True
    assert core.deep_equal(True, 1) is False
    nan = math.nan
    assert core.deep_equal(nan, nan) is True  # the same object, as `deep_equal`
    assert core.numeric_equal(nan, nan, 0.0, 1e-9) is False  # math.isclose


_MODES = ["exact", "ignore", "subset", "superset", "numeric"]


@settings(max_examples=EXAMPLES * 2 // 10, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.one_of(st.none(), st.dictionaries(st.sampled_from(["a", "b", "c"]), _values, max_size=3)),
    st.data(),
    st.sampled_from(_MODES),
)
def test_argument_scores_match_python(
    expected: dict[str, Any] | None, data: st.DataObject, mode: str
) -> None:
    base = expected or {}
    actual = data.draw(
        st.one_of(
            st.just(_twin(base, data.draw)),
            st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), _values, max_size=3),
        )
    )
    got = core.argument_score(expected, actual, mode, 1e-6, 1e-9)
    try:
        want = match_arguments(expected, actual, mode, abs_tol=1e-6, rel_tol=1e-9)
    except OverflowError:
        assert got is None
        return
    assert got is not None
    assert got == want
    assert math.copysign(1, got) == math.copysign(1, want)


# ---------------------------------------------------------------------------- turns

_NAMES = ["search", "lookup", "calc", "srv.calc", "book_hotel"]
_CALLED = [*_NAMES, "srv__search", "plugin-lookup", "other"]
_ARG_VALUES = st.one_of(
    st.sampled_from([1, 1.0, True, "1", "Paris", "parís", None, 2.5, math.nan, [1, 2], {"n": 1}]),
    st.integers(-2, 2),
)
_ARGS = st.dictionaries(st.sampled_from(["city", "n", "q", "ü"]), _ARG_VALUES, max_size=3)


@st.composite
def _turns(draw: st.DrawFn) -> tuple[ReferenceTurn, tuple[ToolCall, ...]]:
    regex = draw(st.integers(0, 9)) == 0
    modes = ["regex", *_MODES] if regex else _MODES
    expected = tuple(
        ExpectedTool(
            name=draw(st.sampled_from(_NAMES[:3] if draw(st.booleans()) else _NAMES)),
            arguments=None if draw(st.integers(0, 5)) == 0 else draw(_ARGS),
            argument_match=draw(st.sampled_from(modes)) if draw(st.booleans()) else "exact",
            abs_tol=draw(st.sampled_from([0.0, 0.5])),
            agent=draw(st.sampled_from([None, None, None, "planner", "booker"])),
        )
        for _ in range(draw(st.integers(0, 6)))
    )
    if any(t.argument_match == "regex" for t in expected):
        expected = tuple(
            t.model_copy(update={"arguments": {k: ".*" for k in t.arguments or {}}})
            if t.argument_match == "regex"
            else t
            for t in expected
        )
    calls = []
    for _ in range(draw(st.integers(0, 7))):
        if expected and draw(st.booleans()):
            like = draw(st.sampled_from(expected))
            name = like.name
            args = (
                _twin(dict(like.arguments or {}), draw)
                if draw(st.booleans())
                else dict(like.arguments or {})
            )
        else:
            name = draw(st.sampled_from(_CALLED))
            args = draw(_ARGS)
        calls.append(
            ToolCall(
                name=name,
                arguments=args,
                result=draw(st.sampled_from([None, "18 degrees", 42, {"t": 18.5}])),
                agent=draw(st.sampled_from([None, "planner", "booker"])),
            )
        )
    turn = ReferenceTurn(
        query="q", expected_tools=expected, tool_sequence_matters=draw(st.booleans())
    )
    return turn, tuple(calls)


def _groups_python_would_hand_to_scipy(
    turn: tc_module.CompiledTurn, calls: tuple[ToolCall, ...], names: list[str]
) -> bool:
    """Some name group has more than one call on both sides, m·n > 16, and is not
    resolved by the in-order diagonal (`_assign`): Python asks scipy, the kernel declines."""
    groups: dict[str, list[int]] = {}
    for i, n in enumerate(names):
        if n in turn.by_name:
            groups.setdefault(n, []).append(i)
    for n, a_idx in groups.items():
        e_idx = turn.by_name[n]
        if len(a_idx) > 1 and len(e_idx) > 1 and len(a_idx) * len(e_idx) > 16:
            diag = [
                turn.matchers[j](calls[i].arguments) for i, j in zip(a_idx, e_idx, strict=False)
            ]
            if not all(x == 1.0 for x in diag):
                return True
    return False


@settings(max_examples=EXAMPLES // 2, deadline=None, suppress_health_check=list(HealthCheck))
@given(_turns(), st.sampled_from(["auto", "declared", "detected"]), st.sampled_from([1.0, 0.75]))
def test_score_turn_matches_python(
    case: tuple[ReferenceTurn, tuple[ToolCall, ...]], utilization: Any, threshold: float
) -> None:
    turn, calls = case
    native = compile_turn(turn)
    assert native is not None
    python = dataclasses.replace(native, native=None, aliases={})
    has_regex = any(
        t.argument_match == "regex" and t.arguments is not None for t in turn.expected_tools or ()
    )
    assert (native.native is None) == (has_regex or not turn.expected_tools)
    names = called_names(calls, native)
    assert names == called_names(calls, python)
    args = ("the answer is 18 degrees", None, DEFAULT_WEIGHTS, threshold, utilization)
    got = score_turn(calls, native, *args, names)
    want = score_turn(calls, python, *args, list(names))
    assert got == want
    if got[0] is not None and want[0] is not None:
        assert got[0].model_dump_json() == want[0].model_dump_json()
    if native.native is not None and calls:
        answered = native.native.score(calls, names) is not None
        assert answered != _groups_python_would_hand_to_scipy(python, calls, names)


# ---------------------------------------------------------------------------- whole results


def _evaluate_both(
    pairs: list[tuple[Conversation, Reference]], monkeypatch: pytest.MonkeyPatch, **cfg: Any
) -> tuple[list[str], list[str]]:
    config = EvaluationConfig(**cfg)
    native = Evaluator(config)
    out_native = [native.evaluate(c, r).model_dump_json() for c, r in pairs]
    with monkeypatch.context() as m:
        m.setattr(tc_module, "native_turn", lambda *a, **k: None)
        python = Evaluator(config)
        out_python = [python.evaluate(c, r).model_dump_json() for c, r in pairs]
    return out_native, out_python


def _references_for(conversation: Conversation) -> list[Reference]:
    """A reference each conversation passes (its own calls expected, in order), and
    failing ones: one argument changed (1 → 1.0 must still pass, a string must not),
    the last call dropped, the first call expected twice, under each matcher."""
    refs: list[Reference] = []
    for variant in ("same", "int_float", "changed", "dropped", "twice", "subset", "numeric"):
        turns = []
        for t in conversation.turns:
            tools = [
                ExpectedTool(
                    name=c.name,
                    arguments=dict(c.arguments),
                    argument_match="subset"
                    if variant == "subset"
                    else "numeric"
                    if variant == "numeric"
                    else "exact",
                    abs_tol=0.01 if variant == "numeric" else 0.0,
                )
                for c in t.tool_calls
            ]
            if tools and variant == "changed":
                first = tools[0]
                args = {k: f"{v}!" for k, v in (first.arguments or {}).items()} or {"x": 1}
                tools[0] = first.model_copy(update={"arguments": args})
            if tools and variant == "int_float":
                first = tools[0]
                args = {
                    k: float(v) if type(v) is int else v for k, v in (first.arguments or {}).items()
                }
                tools[0] = first.model_copy(update={"arguments": args})
            if tools and variant == "dropped":
                tools.pop()
            if tools and variant == "twice":
                tools.insert(0, tools[0])
            turns.append(
                ReferenceTurn(
                    query=t.query or "",
                    expected_tools=tuple(tools),
                    tool_sequence_matters=variant != "subset",
                )
            )
        refs.append(
            Reference(
                id=f"{conversation.id}-{variant}", turns=tuple(turns) or (ReferenceTurn(query=""),)
            )
        )
    return refs


def _corpus_conversations() -> list[tuple[str, list[Conversation]]]:
    from tracepass.collector.app.cli.sources import conversations_from_otlp

    out = []
    for path in sorted(CORPUS.glob("*.otlp.jsonl")):
        out.append((path.name, conversations_from_otlp([path])))
    return out


def test_every_corpus_file_scores_and_stores_identically(monkeypatch: pytest.MonkeyPatch) -> None:
    from tracepass.collector.state.codec import StoredResult, encode_result

    scenarios = _corpus_conversations()
    assert len(scenarios) >= 60
    answered = {"native": 0, "declined": 0}
    real_native_turn = tc_module.native_turn

    class Counting:
        def __init__(self, kernel: Any) -> None:
            self.kernel = kernel

        def score(self, calls: Any, names: list[str]) -> Any:
            got = self.kernel.score(calls, names)
            answered["native" if got is not None else "declined"] += 1
            return got

    def counting_turn(*args: Any) -> Any:
        kernel = real_native_turn(*args)
        return None if kernel is None else Counting(kernel)

    scored = 0
    outcomes: set[str] = set()
    for name, conversations in scenarios:
        pairs = [(c, r) for c in conversations for r in _references_for(c)]
        for match in ("name", "name_and_arguments"):
            got, want = _evaluate_both(pairs, monkeypatch, trajectory_match=match)
            assert got == want, name
        # The stored row (what the results table holds), both ways.
        with monkeypatch.context() as m:
            m.setattr(tc_module, "native_turn", counting_turn)
            native = Evaluator(EvaluationConfig())
            rows = [
                encode_result(
                    StoredResult(conversation=c, result=native.evaluate(c, r), revision=1)
                )
                for c, r in pairs
            ]
        with monkeypatch.context() as m:
            m.setattr(tc_module, "native_turn", lambda *a, **k: None)
            python = Evaluator(EvaluationConfig())
            rows_py = [
                encode_result(
                    StoredResult(conversation=c, result=python.evaluate(c, r), revision=1)
                )
                for c, r in pairs
            ]
        assert rows == rows_py, name
        scored += len(pairs)
        outcomes.update(json.loads(w)["outcome"] for w in want)
    assert scored > 500
    assert {"pass", "fail"} <= outcomes, outcomes
    # the kernel scored the turns itself, not by declining to Python
    assert answered["native"] > 500, answered
    assert answered["declined"] == 0, answered


def test_selection_is_reported() -> None:
    assert native_core.active_core() in ("native", "python")
    assert native_core.core_description().startswith(native_core.active_core())


def test_forcing_an_unknown_core_is_a_precise_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(native_core.ENV, "rust")
    with pytest.raises(native_core.CoreSelectionError, match="TRACEPASS_CORE='rust'"):
        native_core._select()
    monkeypatch.setenv(native_core.ENV, "python")
    assert native_core._select() == (None, "python (TRACEPASS_CORE=python)")
