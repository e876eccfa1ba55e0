"""Issue 13 #1: the pass@k / pass^k windows after `kill -9` equal those of a run that
never stopped. Conversations are replayed through the real OTLP/HTTP exporter; the
collector is killed at seeded random points (between snapshots of the windows, which
are taken every 30 s), restarted on the same state file, and the exporter keeps
retrying what was not acknowledged."""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pytest
from _receiver_support import make_spans
from _serve import Serve, write_config
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult

KILLS = int(os.environ.get("TRACEPASS_KILLS", "3"))  # `make reliability`: 30
CONVERSATIONS = max(60, 10 * KILLS)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240 + 40 * KILLS)]


def _conversations() -> list[list[ReadableSpan]]:
    """Two-turn conversations (pass) and one-turn ones (incomplete: fail), one export
    batch each."""
    return [make_spans(1 if i % 3 == 0 else 2, f"conv-{i}") for i in range(CONVERSATIONS)]


def _window_counts(serve: Serve) -> dict[tuple[str, str], float]:
    """n, c and the plug-in pass@k of the sliding windows (the decayed "fast" window
    weighs outcomes by wall-clock age, which two runs cannot share)."""
    return {
        k: v
        for k, v in serve.samples().items()
        if 'window="fast"' not in k[1]
        and (
            k[0] in ("tracepass_window_conversations", "tracepass_window_successes")
            or (k[0] == "tracepass_pass_at_k" and 'estimator="plugin"' in k[1])
        )
    }


def _wait_all_evaluated(serve: Serve) -> dict[tuple[str, str], float]:
    deadline = time.monotonic() + 90
    while True:
        counts = _window_counts(serve)
        n = sum(v for (name, _), v in counts.items() if name == "tracepass_window_conversations")
        n = round(n)
        if n >= CONVERSATIONS:
            time.sleep(1.0)  # nothing more may arrive (a double count would show now)
            return _window_counts(serve)
        assert time.monotonic() < deadline, f"only {n} of {CONVERSATIONS} evaluated"
        time.sleep(0.2)


def _export(serve: Serve, spans: list[ReadableSpan]) -> bool:
    exporter = OTLPSpanExporter(endpoint=serve.endpoint, timeout=5)
    try:
        return exporter.export(spans) == SpanExportResult.SUCCESS
    except Exception:
        return False
    finally:
        exporter.shutdown()


def test_windows_after_kill_9_equal_an_uninterrupted_run(tmp_path: Path) -> None:
    batches = _conversations()

    clean_dir = tmp_path / "clean"
    clean_dir.mkdir()
    serve = Serve(write_config(clean_dir, clean_dir / "state.sqlite"))
    try:
        for spans in batches:
            assert _export(serve, spans)
        expected = _wait_all_evaluated(serve)
    finally:
        serve.stop()

    rng = random.Random(13)
    kill_after = sorted(rng.sample(range(5, CONVERSATIONS - 5), KILLS))
    crash_dir = tmp_path / "crash"
    crash_dir.mkdir()
    config = write_config(crash_dir, crash_dir / "state.sqlite")
    serve = Serve(config)
    try:
        for i, spans in enumerate(batches):
            while not _export(serve, spans):  # unacknowledged: restart and send again
                serve.stop(kill=True)
                serve = Serve(config)
            if i in kill_after:
                time.sleep(rng.uniform(0.0, 1.5))  # some evaluated, some still open
                serve.stop(kill=True)
                serve = Serve(config)
        got = _wait_all_evaluated(serve)
    finally:
        serve.stop()
    assert {k for k in expected if k[0] == "tracepass_window_conversations"}
    assert got == expected
