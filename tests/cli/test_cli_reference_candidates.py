"""`tracepass references candidates|approve` from real OTLP files (the instrumented
calculator agent) and from a real state file: proposals, skipping what references
already cover, writing a file the loader accepts (never over an existing one), exit
codes, and hostile text shown escaped."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tracepass.collector.app.cli.main import app
from tracepass.collector.state import StateStore, StoredResult
from tracepass.evaluator.models import Conversation, ConversationResult, Outcome, ToolCall, Turn

pytestmark = pytest.mark.slow  # starts a process or a server

HERE = Path(__file__).resolve().parent
runner = CliRunner()
ADD_REF = """
name: calc
references:
  - id: add
    turns:
      - query: What is 15 + 27?
"""


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("traces") / "calc.binpb"
    subprocess.run(
        [sys.executable, str(HERE / "_make_traces.py"), str(out), "--trials", "6"],
        check=True,
        timeout=120,
        capture_output=True,
    )
    return out


def test_candidates_from_otlp_files(traces: Path, tmp_path: Path) -> None:
    res = runner.invoke(app, ["references", "candidates", str(traces), "--format", "json"])
    assert res.exit_code == 0, res.output
    found = json.loads(res.stdout)["candidates"]
    assert {c["query"]: c["tools"] for c in found} == {
        "What is 15 + 27?": ["add"],
        "What is 6 times 7?": ["multiply"],
    }
    add = next(c for c in found if c["tools"] == ["add"])
    assert add["conversations"] == 6
    assert "a: 15" in add["yaml"]
    assert "b: 27" in add["yaml"]

    refs = tmp_path / "refs.yaml"
    refs.write_text(ADD_REF, encoding="utf-8")
    res = runner.invoke(
        app, ["references", "candidates", str(traces), "-r", str(refs), "--format", "json"]
    )
    assert [c["tools"] for c in json.loads(res.stdout)["candidates"]] == [["multiply"]]

    table = runner.invoke(app, ["references", "candidates", str(traces)])
    assert table.exit_code == 0
    assert "2 reference candidate(s)" in table.stdout


def test_approve_writes_a_valid_file_once(traces: Path, tmp_path: Path) -> None:
    res = runner.invoke(app, ["references", "candidates", str(traces), "--format", "json"])
    cid = json.loads(res.stdout)["candidates"][0]["id"]
    out = tmp_path / "new.yaml"
    res = runner.invoke(app, ["references", "approve", cid, "--to", str(out), str(traces)])
    assert res.exit_code == 0, res.output
    assert out.exists()
    check = runner.invoke(app, ["references", "validate", str(out)])
    assert check.exit_code == 0, check.output
    before = out.read_bytes()
    again = runner.invoke(app, ["references", "approve", cid, "--to", str(out), str(traces)])
    assert again.exit_code == 2
    assert "never overwrites" in again.output
    assert out.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["new.yaml"]  # no temporary left
    unknown = runner.invoke(app, ["references", "approve", "nope", "--to", str(tmp_path / "x.yaml"), str(traces)])  # fmt: skip
    assert unknown.exit_code == 2
    assert "no reference candidate" in unknown.output


def test_bad_input_exits_2(tmp_path: Path) -> None:
    res = runner.invoke(app, ["references", "candidates"])
    assert res.exit_code == 2
    assert "either --state FILE or OTLP trace files" in res.output
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"not sqlite at all" * 100)
    res = runner.invoke(app, ["references", "candidates", "--state", str(junk)])
    assert res.exit_code == 2
    assert "not a tracepass state file" in res.output
    res = runner.invoke(app, ["references", "candidates", "--state", str(tmp_path / "none")])
    assert res.exit_code == 2


def test_from_a_state_file_with_hostile_text_escaped(tmp_path: Path) -> None:
    hostile = "Book \x1b[31mnow\u202e please"
    store = StateStore(tmp_path / "state.sqlite")
    store.open()

    async def put_all() -> None:
        for i in range(5):
            conv = Conversation(
                id=f"h-{i}",
                agent_name="a",
                agent_version="1\n0",
                turns=(
                    Turn(
                        query=hostile,
                        answer="Booked flight TP433",
                        tool_calls=(ToolCall(name="book\u202e", arguments={"id": "TP433"}),),
                    ),
                ),
            )
            result = ConversationResult(
                conversation_id=conv.id, reference_id=None, correct=False, outcome=Outcome.UNSCORED
            )
            await store.results.put_result(
                conv.id,
                revision=0,
                closed_at=1.0 + i,
                n_spans=2,
                stored=StoredResult(conv, result, 0),
                evaluated_at=1.0 + i,
            )

    asyncio.run(put_all())
    store.close()
    res = runner.invoke(
        app, ["references", "candidates", "--state", str(tmp_path / "state.sqlite")]
    )
    assert res.exit_code == 0, res.output
    assert "\x1b" not in res.stdout
    assert "\u202e" not in res.stdout
    assert "\\u001b" in res.stdout
    data = runner.invoke(
        app,
        ["references", "candidates", "--state", str(tmp_path / "state.sqlite"), "--format", "json"],
    )
    (found,) = json.loads(data.stdout)["candidates"]
    # The YAML comments carry the provenance escaped: one line each, ASCII only.
    comments = [line for line in found["yaml"].splitlines() if line.startswith("#")]
    assert all(line.isascii() for line in comments)
    assert any('"1\\n0" x5' in line for line in comments)
