"""GenAI events as OTLP log records through the live pipeline: held and stored like
spans, joined to their span whichever arrives first, and recovered after a restart."""

from __future__ import annotations

from pathlib import Path

from test_normalize_basics import make_request
from test_normalize_events import CONV, LOGS, content_less_spans
from test_pipeline import Harness


async def _complete(h: Harness) -> None:
    h.clock.advance(3600)
    assert await h.pipeline.process_due() == 1


async def test_logs_first_then_spans_build_one_joined_conversation(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    p = await h.start()
    for logs in LOGS:
        res = await p.ingest_logs(logs)
        assert (res.accepted, res.rejected) == (
            len(logs.resource_logs[0].scope_logs[0].log_records),
            0,
        )
    await p.ingest(make_request(*content_less_spans()))
    await _complete(h)
    ((conv, _ref, _set),) = h.evaluator.calls
    assert conv.id == CONV
    (turn,) = conv.turns
    assert turn.query == "Weather in Paris?"
    assert [(c.arguments, c.result) for c in turn.tool_calls] == [
        ({"city": "Paris"}, "Sunny, 21 C")
    ]
    assert h.metrics.value("tracepass_spans_read", convention="genai_log_events") == 3
    await p.stop()


async def test_log_events_survive_a_restart_before_their_spans_arrive(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    p = await h.start()
    for logs in LOGS:
        await p.ingest_logs(logs)
    await p.stop()
    h2 = Harness(tmp_path)
    p2 = await h2.start()
    await p2.ingest(make_request(*content_less_spans()))
    await _complete(h2)
    ((conv, _ref, _set),) = h2.evaluator.calls
    assert conv.turns[0].query == "Weather in Paris?"
    assert conv.turns[0].tool_calls[0].result == "Sunny, 21 C"
    await p2.stop()
