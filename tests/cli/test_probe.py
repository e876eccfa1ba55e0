"""`tracepass probe` input errors, checkpoint parsing and the example reference sets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tracepass.collector.app.cli.main import app
from tracepass.collector.app.probe.runner import Checkpoint, CheckpointError, TrialResult

runner = CliRunner()
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
REFS = str(EXAMPLES / "references")


def test_example_references_validate() -> None:
    res = runner.invoke(app, ["references", "validate", REFS])
    assert res.exit_code == 0, res.output
    assert "7 reference(s)" in res.output


def test_bad_target_exit_2() -> None:
    res = runner.invoke(app, ["probe", "-r", REFS, "--agent", "no_such_module_xyz:answer"])
    assert res.exit_code == 2
    assert "cannot import 'no_such_module_xyz'" in res.output


def test_missing_attribute_exit_2() -> None:
    target = f"{EXAMPLES / 'travel_agent.py'}:nope"
    res = runner.invoke(app, ["probe", "-r", REFS, "--agent", target])
    assert res.exit_code == 2
    assert "has no attribute 'nope'" in res.output


def test_k_above_trials_exit_2() -> None:
    res = runner.invoke(app, ["probe", "-r", REFS, "--agent", "x:y", "--trials", "2", "--k", "3"])
    assert res.exit_code == 2
    assert "k=3 is more than --trials 2" in res.output


def test_resume_needs_checkpoint() -> None:
    res = runner.invoke(app, ["probe", "-r", REFS, "--agent", "x:y", "--resume"])
    assert res.exit_code == 2
    assert "--resume needs --checkpoint" in res.output


def test_checkpoint_round_trip_and_errors(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    ck = Checkpoint(path)
    r = TrialResult("a", "s", 0, "probe-x-a-0", "pass", True, answers=["hi"])
    ck.open({"tracepass_probe": 1, "run_id": "x"}, [])
    ck.append(r)
    ck.close()
    with path.open("a") as f:
        f.write('{"reference_id": "a", "tri')  # cut by a kill: ignored
    header, done = Checkpoint(path).load()
    assert header["run_id"] == "x"
    assert [d.to_json() for d in done] == [r.to_json()]

    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"something": "else"}) + "\n")
    with pytest.raises(CheckpointError, match="not a tracepass probe checkpoint"):
        Checkpoint(bad).load()
    with pytest.raises(CheckpointError, match="no such checkpoint"):
        Checkpoint(tmp_path / "none").load()


def test_unreachable_collector_exit_2() -> None:
    target = f"{EXAMPLES / 'travel_agent.py'}:answer"
    res = runner.invoke(
        app, ["probe", "-r", REFS, "--agent", target, "--collector", "http://127.0.0.1:1"]
    )
    assert res.exit_code == 2
    assert "--collector http://127.0.0.1:1" in res.output
