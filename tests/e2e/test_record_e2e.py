"""`tracepass serve --record DIR`: the example agent exports over real OTLP, the collector
records every accepted request to rotated files, and `tracepass evaluate` reads them."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from _live_support import EXAMPLES, FAST_CONFIG, TRACEPASS, run_agent, serve

pytestmark = pytest.mark.slow


def test_serve_record_writes_files_that_evaluate_reads(tmp_path: Path) -> None:
    record = tmp_path / "recorded"
    config = {**FAST_CONFIG, "receiver": {"record_max_file_bytes": 1024}}
    refs = EXAMPLES / "references"
    with serve(tmp_path, "--references", str(refs), "--record", str(record), config=config) as s:
        # Two agent processes: at least two export requests, each over the 1 KiB file size.
        run_agent(s.http, "run", "--conversations", "3", "--prefix", "rec-")
        run_agent(s.http, "run", "--conversations", "3", "--prefix", "rec2-")
        assert s.terminate() == 0
    files = sorted(record.glob("traces-*.binpb"))
    assert len(files) >= 2, "small max_file_bytes must rotate"
    out = subprocess.run(
        [
            TRACEPASS,
            "evaluate",
            *map(str, files),
            "-r",
            str(refs),
            "--format",
            "json",
            "--no-readiness-gate",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    ids = {c["conversation_id"] for c in json.loads(out.stdout)["conversations"]}
    assert {f"rec-{n}" for n in range(3)} | {f"rec2-{n}" for n in range(3)} <= ids
