"""SIGTERM is not held up by an OTLP metrics endpoint that never answers: the final
export is bounded by `metrics.otlp_timeout_s`."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest
from _live_support import FAST_CONFIG, serve

pytestmark = pytest.mark.slow


def test_sigterm_with_a_silent_otlp_endpoint_stops_within_the_export_timeout(
    tmp_path: Path,
) -> None:
    # A loopback listener that accepts connections and never answers.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            held.append(conn)

    threading.Thread(target=accept, daemon=True).start()
    port = listener.getsockname()[1]
    metrics = {
        **FAST_CONFIG["metrics"],
        "otlp_endpoint": f"http://127.0.0.1:{port}",
        "otlp_timeout_s": 1,
    }
    try:
        with serve(tmp_path, config={**FAST_CONFIG, "metrics": metrics}) as s:
            time.sleep(2.5)  # at least one periodic export is stuck on the silent peer
            start = time.monotonic()
            assert s.terminate(timeout=300) == 0
            stopped_in = time.monotonic() - start
        # A functional bound, not a benchmark: unbounded, the SDK's default 10 s export
        # timeout (plus the one in flight) holds SIGTERM for 15-20 s.
        assert stopped_in < 8, stopped_in
    finally:
        listener.close()
        for conn in held:
            conn.close()
