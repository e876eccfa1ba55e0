"""With `batch` durability, evaluated conversations kept for late spans hold no records
in memory: a late span reads its conversation back from the state file's span buffer
(after a restart too), and the revision sees everything the first evaluation saw."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

from _pipeline_support import Harness, genai_request, rec, turn_records

from tracepass.collector.pipeline import Pipeline
from tracepass.collector.records import SpanRecord
from tracepass.evaluator.models import Conversation


def _tools(conversation: Conversation) -> list[list[str]]:
    return [[c.name for c in t.tool_calls] for t in conversation.turns]


def _count_read_backs(p: Pipeline) -> list[list[str]]:
    """Record the keys of every read-back the real store serves."""
    assert p.store is not None
    store = p.store.spans
    real = store.read_back
    calls: list[list[str]] = []

    async def counted(keys: Collection[str], *args: Any) -> dict[str, list[SpanRecord]]:
        calls.append(sorted(keys))
        return await real(keys, *args)

    store.read_back = counted  # type: ignore[method-assign]
    return calls


async def test_a_late_span_reads_its_conversation_back_then_again_after_a_restart(
    tmp_path: Path,
) -> None:
    h = Harness(tmp_path, idle_timeout_s=60, retention_s=600)
    p = await h.start()
    reads = _count_read_backs(p)
    await p.ingest(genai_request(1, 10, "c", ["geo", "weather"], 0))
    await p.ingest(genai_request(2, 20, "c", ["forecast"], 1_000))
    h.clock.advance(61)
    await p.process_due()
    assert _tools(h.evaluator.calls[0][0]) == [["geo", "weather"], ["forecast"]]
    asm = p.assembler
    assert (asm.retained_spans, asm.held_spans) == (5, 0)  # on disk, nothing in memory
    assert asm.snapshot("c") == ((), 0, False)
    assert reads == []  # completion reads nothing

    h.clock.advance(10)
    # A retry of "forecast" and a late tool span of the second turn.
    await p.ingest(genai_request(2, 20, "c", ["forecast", "late"], 1_000, root=False))
    assert reads == [["c"]]
    h.clock.advance(5.1)
    await p.process_due()
    (_, first), (_, second) = h.results
    assert (first.revision, second.revision, second.reason) == (0, 1, "late_spans")
    assert _tools(h.evaluator.calls[1][0]) == [["geo", "weather"], ["forecast", "late"]]
    assert second.n_spans == 6
    assert (asm.retained_spans, asm.held_spans) == (6, 0)
    await p.stop()

    h2 = Harness(tmp_path, idle_timeout_s=60, retention_s=600)
    h2.clock.t = h.clock.t + 20
    p2 = await h2.start()
    reads2 = _count_read_backs(p2)
    assert (p2.assembler.retained_spans, p2.assembler.held_spans) == (6, 0)
    assert h2.evaluator.calls == []  # retained, not re-evaluated
    await p2.ingest(genai_request(1, 10, "c", ["geo", "weather", "again"], 0, root=False))
    assert reads2 == [["c"]]
    h2.clock.advance(5.1)
    await p2.process_due()
    ((conversation, _, _),) = h2.evaluator.calls
    assert _tools(conversation) == [["geo", "weather", "again"], ["forecast", "late"]]
    assert h2.results[0][1].revision == 2

    # Past retention: the span buffer is purged, and a later span is dropped (counted),
    # not evaluated from nothing.
    h2.clock.advance(601)
    await p2.process_due()
    await p2.purge()
    assert p2.store is not None
    assert p2.store.request_count() == 0
    await p2.ingest(genai_request(1, 10, "c", ["too late"], 0, root=False))
    assert reads2 == [["c"]]
    assert h2.metrics.value("tracepass_spans_dropped", reason="after_retention") == 1
    await p2.stop()


async def test_records_stored_without_their_request_and_merged_traces_are_read_back(
    tmp_path: Path,
) -> None:
    """The two other ways records reach the span buffer: as span rows (records given
    without their request) and under a trace-only key later merged into the
    conversation."""
    h = Harness(tmp_path, idle_timeout_s=60, trace_grace_s=60, retention_s=600)
    p = await h.start()
    reads = _count_read_backs(p)
    # Turn 2's tool spans arrive first, with no conversation id: buffered under their
    # trace until the root names the conversation.
    await p.ingest(genai_request(2, 20, None, ["forecast"], 1_000, root=False))
    await p.ingest(genai_request(2, 20, "c", [], 1_000))
    await p.ingest_records(turn_records(1, 100, "c", "weather in Paris?", "Sunny", ["geo"], 0))
    h.clock.advance(61)
    await p.process_due()
    assert _tools(h.evaluator.calls[0][0]) == [["geo"], ["forecast"]]
    h.clock.advance(10)
    late = rec(1, 150, 100, conv="c", name="late span")
    await p.ingest_records([late])
    assert reads == [["c"]]
    h.clock.advance(5.1)
    await p.process_due()
    revised = h.evaluator.calls[1][0]
    assert _tools(revised) == [["geo"], ["forecast"]]
    assert h.results[1][1].n_spans == 5
    await p.stop()
