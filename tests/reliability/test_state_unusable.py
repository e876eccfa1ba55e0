"""Issue 21 #13, through the real `tracepass serve`: a state file with damaged pages is
exit 2 with its path and a clear message (it was an uncaught `sqlite3.DatabaseError`
during recovery: a traceback and exit 1, which docs/cli.md reserves for other things),
and a read-only state directory is reported as such (it was "cannot listen")."""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

import pytest
from _serve import TRACEPASS, Serve, write_config
from _tmpfs import tmpfs
from test_normalize_basics import make_request, make_span

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

PAGE = 16 * 1024  # the state file's page size (state/store.py)


def _run_serve(config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(TRACEPASS), "serve", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _request(i: int) -> bytes:
    span = make_span(
        "invoke_agent travel",
        {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "travel",
            "gen_ai.input.messages": [{"role": "user", "content": "x" * 20_000}],
        },
        trace_id=(i + 1).to_bytes(16, "big"),
    )
    return make_request(span).SerializeToString()  # type: ignore[arg-type]


def test_damaged_pages_are_exit_2_with_the_path(tmp_path: Path) -> None:
    state = tmp_path / "state.db"
    # Conversations stay open, so recovery must read every stored request back.
    config = write_config(tmp_path, state, assembly={"idle_timeout_s": 3600, "trace_grace_s": 3600})
    serve = Serve(config)
    try:
        for i in range(40):
            assert serve.request("POST", "/v1/traces", _request(i))[0] == 200
    finally:
        serve.stop()
    data = bytearray(state.read_bytes())
    pages = len(data) // PAGE
    assert pages > 8, pages
    rnd = random.Random(21)
    for page in range(pages // 2, pages):  # the schema's first pages stay readable
        for offset in range(page * PAGE, (page + 1) * PAGE, 7):
            data[offset] = rnd.randrange(256)
    state.write_bytes(bytes(data))
    done = _run_serve(config)
    assert done.returncode == 2, done.stderr[-2000:]
    assert str(state) in done.stderr
    assert "damaged" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("where", ["state.db", "sub/state.db"])
def test_read_only_state_directory_is_reported_as_such(tmp_path: Path, where: str) -> None:
    with tmpfs(tmp_path / "ro", "ro,size=1m", "a read-only tmpfs") as ro:
        state = ro / where
        done = _run_serve(write_config(tmp_path, state))
    assert done.returncode == 2, done.stderr[-2000:]
    assert "not writable" in done.stderr
    assert "cannot listen" not in done.stderr
    assert str(ro) in done.stderr
    assert "Traceback" not in done.stderr
