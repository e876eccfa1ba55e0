"""Issue 13 #8: per-item warnings (one per evicted conversation, per dropped span) are
rate-limited with a count instead of one line each — 36,928 lines in 60 s before."""

from __future__ import annotations

import logging

import pytest
from _pipeline_support import TOOL, Clock, Metrics, rec, turn_records

from tracepass.collector.assembly import Assembler
from tracepass.collector.config import AssemblyConfig
from tracepass.evaluator.ratelimited_log import RateLimitedLog


def test_evictions_and_drops_log_a_few_lines_with_counts(
    caplog: pytest.LogCaptureFixture,
) -> None:
    metrics = Metrics()
    asm = Assembler(
        AssemblyConfig(max_open_conversations=2, max_spans_per_conversation=3),
        metrics.instruments,
        clock=Clock(),
    )
    caplog.set_level(logging.INFO, logger="tracepass")
    for i in range(2_000):  # 1,998 evictions
        asm.add(turn_records(i + 1, 10 * i + 1, f"conv-{i}", "q", "a", [], t0=0))
    big = [rec(9_999, 100_000 + j, 100_000, TOOL, conv="big", tool_name="t") for j in range(500)]
    asm.add(big)  # 497 spans over max_spans_per_conversation
    evicted = metrics.value("tracepass_conversations_evicted", reason="max_open_conversations")
    assert evicted >= 1_998
    dropped = metrics.value("tracepass_spans_dropped", reason="max_spans_per_conversation")
    assert dropped >= 490
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("tracepass")]
    assert len(lines) <= 4, lines[:10]  # one per kind per 10 s


def test_suppressed_count_rides_on_the_next_line(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    limited = RateLimitedLog(logging.getLogger("tracepass.test"), 10.0, clock=lambda: now[0])
    caplog.set_level(logging.INFO, logger="tracepass.test")
    for i in range(1_000):
        limited.warning("evicted", "conversation %s evicted", i)
        limited.warning("other", "other %s", i)
    now[0] = 10.0
    limited.warning("evicted", "conversation %s evicted", "last")
    messages = [r.getMessage() for r in caplog.records]
    assert messages == [
        "conversation 0 evicted",
        "other 0",
        "conversation last evicted (999 similar messages suppressed in the last 10 s)",
    ]
