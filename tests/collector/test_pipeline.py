"""Pipeline: ingest → assembly → matching → evaluation → results/listener, with real
SQLite state, restart recovery, back-pressure and the conversation view."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from _pipeline_support import (
    TOOL,
    TWO_TURN_VIEWS,
    Clock,
    Harness,
    Metrics,
    StubEvaluator,
    end_marker,
    rec,
    tid,
    turn_records,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracepass.collector.api import ConversationQuery, ConversationViews
from tracepass.collector.config import AssemblyConfig, StateConfig
from tracepass.collector.pipeline import Pipeline, ResultInfo
from tracepass.collector.receiver.sink import Overloaded, SpanSink
from tracepass.collector.records import Rejection, SpanRecord
from tracepass.evaluator.models import ConversationResult


def conversation(conv: str = "c1") -> list[SpanRecord]:
    return [
        *turn_records(1, 100, conv, "weather in Paris?", "Sunny", ["geo", "weather"], t0=1_000),
        *turn_records(2, 200, conv, "and tomorrow?", "Rain", ["forecast"], t0=5_000),
    ]


def test_protocols_are_implemented() -> None:
    p = Pipeline(StubEvaluator())
    sink: SpanSink = p
    query: ConversationQuery = ConversationViews(p)
    assert sink.ready() is False
    assert query.conversation_view("c1") is None


async def test_reference_turns_completion_match_evaluate_store_and_view(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    p = await h.start()
    res = await p.ingest_records(conversation())
    assert (res.accepted, res.rejected) == (5, 0)
    assert await p.process_due() == 1  # the reference has two turns: complete now
    ((_conv, ref, set_name),) = h.evaluator.calls
    assert ref is not None
    assert ref.id == "weather"
    assert set_name == "demo"
    ((_result, info),) = h.results
    assert info.revision == 0
    assert info.reason == "reference_turns"
    assert info.complete
    assert info.match_method == "query"
    assert info.now == h.clock.t
    assert info.lag_s >= 0
    view = ConversationViews(p).conversation_view("c1")
    assert view is not None
    assert view["conversation_id"] == "c1"
    assert view["agent"] == {"name": "agent", "version": "1.0"}
    assert view["trace_ids"] == [tid(1), tid(2)]
    turn = view["turns"][0]
    # The conversation shape, plus tokens, cost and latency (checked in test_usage*.py).
    figures = {"usage", "duration_s", "latency", "spans"}
    assert {k: v for k, v in turn.items() if k not in figures} == TWO_TURN_VIEWS[0]
    assert turn["usage"]["model_calls"] == 0
    assert turn["duration_s"] is not None
    assert view["evaluation"]["outcome"] == "pass"
    assert view["revision"] == 0
    assert ConversationViews(p).conversation_view("nope") is None
    await p.stop()
    # After a restart the view comes from SQLite.
    h2 = Harness(tmp_path)
    p2 = await h2.start()
    assert ConversationViews(p2).conversation_view("c1") == view
    await p2.stop()


async def test_unmatched_is_counted_and_still_evaluated() -> None:
    h = Harness(None)
    p = await h.start()
    await p.ingest_records(
        [*turn_records(9, 10, "u", "no such task", "?", [], t0=0), end_marker(8, 1, "u", 1)]
    )
    await p.process_due()
    ((_conv, ref, _),) = h.evaluator.calls
    assert ref is None
    assert h.metrics.value("tracepass_conversations_unmatched") == 1
    await p.stop()


async def test_late_span_creates_revision_visible_in_view() -> None:
    h = Harness(None)
    p = await h.start()
    await p.ingest_records(conversation())
    await p.process_due()
    h.clock.advance(3)
    await p.ingest_records([rec(2, 250, 200, TOOL, start=6_000, conv="c1", tool_name="late")])
    assert ConversationViews(p).conversation_view("c1")["status"] == "open"  # type: ignore[index]
    h.clock.advance(5.1)
    await p.process_due()
    assert [i.revision for _, i in h.results] == [0, 1]
    assert h.results[1][1].reason == "late_spans"
    view = ConversationViews(p).conversation_view("c1")
    assert view is not None
    assert view["revision"] == 1
    assert [c["name"] for c in view["turns"][1]["tool_calls"]] == ["forecast", "late"]
    assert h.metrics.value("tracepass_revisions") == 1
    # Only the first evaluation counts as unmatched/completed.
    assert h.metrics.value("tracepass_conversations_completed") == 1
    await p.stop()


async def test_restart_resumes_open_conversation(tmp_path: Path) -> None:
    h = Harness(tmp_path, idle_timeout_s=60)
    p = await h.start()
    first_turn = conversation()[:3]
    await p.ingest_records(first_turn)
    await p.stop()  # conversation still open (one of two turns)
    assert h.evaluator.calls == []

    h2 = Harness(tmp_path, idle_timeout_s=60)
    h2.clock.t = h.clock.t + 10
    p2 = await h2.start()
    assert p2.assembler.is_open("c1")
    await p2.ingest_records(conversation()[3:])
    await p2.process_due()
    ((conv, _, _),) = h2.evaluator.calls
    assert [t.query for t in conv.turns] == ["weather in Paris?", "and tomorrow?"]
    await p2.stop()

    # Third start: evaluated and within retention -> retained, nothing re-evaluated.
    h3 = Harness(tmp_path, idle_timeout_s=60)
    h3.clock.t = h2.clock.t + 1
    p3 = await h3.start()
    await p3.process_due(h3.clock.t + 1000)
    assert h3.evaluator.calls == []
    assert not p3.assembler.is_open("c1")
    await p3.stop()


async def test_restart_times_out_from_stored_arrival_times(tmp_path: Path) -> None:
    h = Harness(tmp_path, idle_timeout_s=60)
    p = await h.start()
    await p.ingest_records(conversation()[:3])
    await p.stop()
    h2 = Harness(tmp_path, idle_timeout_s=60)
    h2.clock.t = h.clock.t + 61  # the collector was down longer than the idle timeout
    p2 = await h2.start()
    await p2.process_due()
    ((_, info),) = h2.results
    assert info.reason == "idle"
    await p2.stop()


async def test_durability_none_writes_nothing_on_ingest_but_persists_on_stop(
    tmp_path: Path,
) -> None:
    h = Harness(tmp_path, durability="none")
    p = await h.start()
    await p.ingest_records(conversation()[:3])
    assert p.store is not None
    assert p.store.span_count() == 0
    await p.stop()
    h2 = Harness(tmp_path, durability="none")
    p2 = await h2.start()
    assert p2.assembler.is_open("c1")
    await p2.stop()


async def test_overloaded_when_evaluation_backlog_is_full() -> None:
    gate = asyncio.Event()

    class Slow(StubEvaluator):
        async def aevaluate(self, conversation, reference, *, reference_set=None):  # type: ignore[no-untyped-def]
            await gate.wait()
            return await super().aevaluate(conversation, reference, reference_set=reference_set)

    p = Pipeline(Slow(), max_pending_evaluations=2, clock=Clock())
    await p.start(background=False)
    for i in range(2):
        await p.ingest_records(
            [*turn_records(i + 1, 10, f"c{i}", "q", "a", [], 0), end_marker(50 + i, 1, f"c{i}", 1)]
        )
    await p.process_due(wait=False)
    with pytest.raises(Overloaded, match="evaluation backlog"):
        await p.ingest_records(turn_records(9, 10, "c9", "q", "a", [], 0))
    gate.set()
    await p.process_due()
    await p.ingest_records(turn_records(9, 10, "c9", "q", "a", [], 0))
    await p.stop()


async def test_ingest_counts_rejections_and_uses_normalizer() -> None:
    m = Metrics()
    recs = conversation()

    def normalizer(req: ExportTraceServiceRequest) -> tuple[list[SpanRecord], list[Rejection]]:
        return recs, [
            Rejection(
                trace_id="zz",
                span_id="yy",
                reason="invalid_trace_id",
                message="trace id 'zz' is not 32 hex chars",
            )
        ]

    p = Pipeline(
        StubEvaluator(),
        instruments=m.instruments,
        meter=m.meter,
        normalizer=normalizer,
        clock=Clock(),
    )
    with pytest.raises(Overloaded):  # not started yet
        await p.ingest(ExportTraceServiceRequest())
    await p.start(background=False)
    res = await p.ingest(ExportTraceServiceRequest())
    assert (res.accepted, res.rejected) == (5, 1)
    assert "not 32 hex" in res.message
    assert m.value("tracepass_spans_rejected", reason="invalid_trace_id") == 1
    await p.stop()


async def test_background_loop_completes_by_deadline(tmp_path: Path) -> None:
    """The real background task with a real clock and a tiny idle timeout."""
    results: list[ResultInfo] = []
    done = asyncio.Event()

    def listener(r: ConversationResult, i: ResultInfo) -> None:
        results.append(i)
        done.set()

    p = Pipeline(
        StubEvaluator(),
        assembly=AssemblyConfig(idle_timeout_s=0.05, tick_interval_s=0.01),
        state=StateConfig(path=tmp_path / "s.sqlite"),
        listener=listener,
    )
    await p.start()
    await p.ingest_records(conversation()[:3])
    await asyncio.wait_for(done.wait(), timeout=120)
    assert results[0].reason == "idle"
    await p.stop()


def test_tune_gc_raises_the_young_threshold_and_never_lowers_it() -> None:
    import gc

    from tracepass.collector.app.cli.serve import tune_gc

    before = gc.get_threshold()
    try:
        gc.set_threshold(700, before[1], before[2])
        tune_gc(5_000)
        assert gc.get_threshold() == (5_000, before[1], before[2])
        tune_gc(1_000)  # never lowered
        assert gc.get_threshold()[0] == 5_000
    finally:
        gc.set_threshold(*before)


@pytest.mark.slow  # starts a process or a server
def test_freeze_startup_objects_takes_them_out_of_the_gc_scans() -> None:
    """In a fresh interpreter (freezing is process-wide and permanent)."""
    import subprocess
    import sys

    code = (
        "import gc\n"
        "from tracepass.collector.app.cli.serve import freeze_startup_objects\n"
        "assert gc.get_freeze_count() == 0\n"
        "freeze_startup_objects()\n"
        "assert gc.get_freeze_count() > 10_000, gc.get_freeze_count()\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)


async def test_purge_drops_spans_after_retention_then_results_after_their_horizon(
    tmp_path: Path,
) -> None:
    h = Harness(tmp_path, retention_s=100.0)
    p = await h.start()
    await p.ingest_records(conversation())
    assert await p.process_due() == 1
    assert ConversationViews(p).conversation_view("c1") is not None
    h.clock.t += 101.0  # past span retention: spans go, the result stays
    assert await p.purge() > 0
    assert p.store is not None
    assert p.store.results.get_result("c1") is not None
    h.clock.t += 7 * 86400.0  # past state.results_retention_s (default 7 days)
    await p.purge()
    assert p.store.results.get_result("c1") is None
    await p.stop()


async def test_a_result_scored_by_the_real_evaluator_reads_back_from_the_state_file(
    tmp_path: Path,
) -> None:
    """The stored result (format 4) leaves out the result turns' copy of the
    conversation's queries, answers and tool calls, and their reference's expected
    tools (a `reference_tools` row): read back from the file, it is the data the
    pipeline holds in memory."""
    from tracepass.collector.state.codec import decode_result
    from tracepass.evaluator.scoring.evaluator import Evaluator

    h = Harness(tmp_path)
    h.pipeline.evaluator = Evaluator()
    p = await h.start()
    await p.ingest_records(conversation())
    assert await p.process_due() == 1
    in_memory = p.latest_result("c1")
    assert p.store is not None
    (text,) = p.store._reader.execute("SELECT view FROM results").fetchone()  # type: ignore[union-attr]
    assert '"turn_io":1' in text
    assert in_memory is not None
    assert in_memory.result is not None
    assert [len(t.tool_calls) for t in in_memory.result.turns] == [2, 1]
    assert '"tools":"' in text
    again = decode_result(text, p.store.results.tools_lookup())
    # Equal as data (`arguments_source`, provenance for `inspect`, is never stored).
    assert again.conversation.model_dump_json() == in_memory.conversation.model_dump_json()
    assert again.result is not None
    assert again.result.model_dump_json() == in_memory.result.model_dump_json()
    await p.stop()


async def test_unknown_reference_id_is_counted_and_warned(caplog: pytest.LogCaptureFixture) -> None:
    """A misspelled reference_id falls back to query matching; it is counted
    (tracepass_reference_id_unknown_total) and said once, not silently."""
    import dataclasses
    import logging

    h = Harness(None)
    p = await h.start()
    records = [dataclasses.replace(r, reference_id="wether") for r in conversation("typo")]
    with caplog.at_level(logging.WARNING):
        await p.ingest_records(records)
        await p.process_due()
    ((_result, info),) = h.results
    assert info.match_method == "query"  # still matched, by its query
    assert h.metrics.value("tracepass_reference_id_unknown") == 1
    assert "names reference_id 'wether', which no loaded reference set has" in caplog.text
    await p.stop()
