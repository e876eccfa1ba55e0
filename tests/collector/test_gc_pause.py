"""Issue 36 lever 1: no cyclic GC mid-batch on `tracepass serve`'s evaluation path
(`pipeline/gc_pause.py`), and the failure analysis computed once per result for a
whole batch (`explain.failure_analysis`)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from tracepass.collector.pipeline.gc_pause import BatchGcPause
from tracepass.evaluator.models import (
    Conversation,
    ExpectedTool,
    Reference,
    ReferenceTurn,
    ToolCall,
    Turn,
)
from tracepass.evaluator.scoring import explain
from tracepass.evaluator.scoring.evaluator import Evaluator


@pytest.fixture(autouse=True)
def _restore_gc() -> Iterator[None]:
    was = gc.isenabled()
    yield
    if was:
        gc.enable()
    else:
        gc.disable()


def test_a_pause_is_a_no_op_unless_enabled() -> None:
    pause = BatchGcPause()
    with pause.held():
        assert gc.isenabled()


def test_nested_pauses_resume_collection_when_the_last_ends() -> None:
    pause = BatchGcPause()
    pause.enable()
    with pause.held():
        assert not gc.isenabled()
        with pause.held():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_gc_disabled_by_someone_else_stays_disabled() -> None:
    pause = BatchGcPause()
    pause.enable()
    gc.disable()
    with pause.held():
        pass
    assert not gc.isenabled()


def test_a_pause_ends_early_above_its_allocation_bound() -> None:
    pause = BatchGcPause(limit=1_000)
    pause.enable()
    with pause.held():
        held = [[i] for i in range(5_000)]  # net container allocations above the bound
        pause.check()
        assert gc.isenabled()
        del held
    assert gc.isenabled()


def test_the_failure_analysis_of_a_whole_batch_is_computed_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The chain's links see a batch one link at a time (store, then the failure log):
    each result of a 100-result batch is analysed once, not once per link."""
    reference = Reference(
        id="r",
        turns=(
            ReferenceTurn(
                query="q", expected_tools=(ExpectedTool(name="book", arguments={"id": "A"}),)
            ),
        ),
    )
    results = [
        Evaluator().evaluate(
            Conversation(
                id=f"c{i}",
                turns=(
                    Turn(
                        query="q",
                        answer="ok",
                        tool_calls=(ToolCall(name="book", arguments={"id": f"B{i}"}),),
                    ),
                ),
            ),
            reference,
        )
        for i in range(100)
    ]
    calls = []
    real = explain._analyse

    def counting(result: object, complete: bool | None) -> explain.FailureAnalysis:
        calls.append(result)
        return real(result, complete)  # type: ignore[arg-type]

    monkeypatch.setattr(explain, "_analyse", counting)
    first = [explain.failure_analysis(r, True).signatures for r in results]  # the store
    reasons = [explain.failure_reasons(r, limit=3) for r in results]  # the failure log
    assert len(calls) == len(results)
    assert all(first)
    assert all(reasons)
    assert [explain.failure_analysis(r, True).signatures for r in results] == first
