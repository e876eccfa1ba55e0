"""From real spans to verdicts: an instrumented agent (tracepass decorators + OTel SDK)
writes OTLP files; `conversations`, `evaluate` and `compare` read them. The last tests
run the installed `tracepass` executable in a subprocess, as CI would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from _contract import assert_contract
from typer.testing import CliRunner

from tracepass.collector.app.cli.main import app

pytestmark = pytest.mark.slow  # starts a process or a server

HERE = Path(__file__).resolve().parent
REFS = HERE / "data" / "calc_refs.yaml"
TRACEPASS = Path(sys.executable).parent / "tracepass"
runner = CliRunner()


def _make(out: Path, *args: str) -> Path:
    subprocess.run(
        [sys.executable, str(HERE / "_make_traces.py"), str(out), *args],
        check=True,
        timeout=120,
        capture_output=True,
    )
    return out


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("traces")
    return {
        "v1": _make(d / "v1.binpb", "--version", "1.0", "--trials", "4"),
        "v2": _make(d / "v2.binpb", "--version", "2.0", "--trials", "4", "--bug-every", "2"),
    }


def test_conversations_json_contract(traces: dict[str, Path]) -> None:
    res = runner.invoke(app, ["conversations", str(traces["v2"]), "--format", "json"])
    assert res.exit_code == 0, res.output
    convs = json.loads(res.stdout)["conversations"]
    assert len(convs) == 9
    by_id = {c["conversation_id"]: c for c in convs}
    conv = by_id["add-2.0-0"]
    assert set(conv) >= {"conversation_id", "agent", "trace_ids", "turns"}
    assert conv["agent"] == {"name": "calc-agent", "version": "2.0"}
    assert conv["trace_ids"]  # the turn's trace (+ the end marker's own trace)
    (turn,) = conv["turns"]
    assert turn["query"] == "What is 15 + 27?"
    assert turn["answer"] == "The answer is 41."
    (call,) = turn["tool_calls"]
    assert set(call) == {"name", "arguments", "result", "error", "call_id"}
    assert call["name"] == "add"
    assert call["arguments"] == {"a": 15, "b": 26}
    assert call["error"] is None


def test_conversations_table_and_bad_files(traces: dict[str, Path], tmp_path: Path) -> None:
    res = runner.invoke(app, ["conversations", str(traces["v1"])])
    assert res.exit_code == 0, res.output
    assert "9 conversation(s)" in res.stdout
    res = runner.invoke(app, ["conversations", str(tmp_path / "none.jsonl")])
    assert res.exit_code == 2
    assert "none.jsonl: no such file" in res.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"resourceSpans": []}\n{not json\n', encoding="utf-8")
    res = runner.invoke(app, ["conversations", str(bad)])
    assert res.exit_code == 2
    assert "bad.jsonl:2" in res.stderr
    res = runner.invoke(app, ["conversations", str(tmp_path)])
    assert res.exit_code == 2
    assert "is a directory" in res.stderr


def test_evaluate_traces_counts_and_estimates(traces: dict[str, Path]) -> None:
    res = runner.invoke(
        app, ["evaluate", str(traces["v2"]), "--references", str(REFS), "--format", "json"]
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    s = doc["summary"]
    assert (s["conversations"], s["matched"], s["unmatched"]) == (9, 8, 1)
    assert doc["unmatched_conversations"] == ["weather-2.0"]
    # add: 2 of 4 trials correct (every 2nd is wrong); mul: 4 of 4.
    assert s["correct"] == 6
    assert s["pass_at_k"]["1"]["unbiased"] == pytest.approx((0.5 + 1.0) / 2)
    assert s["pass_pow_k"]["3"]["unbiased"] == pytest.approx((0.0 + 1.0) / 2)
    assert s["pass_pow_k"]["3"]["plugin"] == pytest.approx(0.75**3)
    assert s["tool_correctness"]["correct"] == 6
    failed = [c for c in doc["conversations"] if not c["correct"]]
    assert {c["reference_id"] for c in failed} == {"add"}
    turn = failed[0]["turns"][0]
    assert turn["tool_correctness"]["parameters"] < 1.0
    assert turn["tool_calls"][0]["arguments"] == {"a": 15, "b": 26}


def test_evaluate_traces_gate_and_reference_errors(traces: dict[str, Path], tmp_path: Path) -> None:
    base = ["evaluate", str(traces["v2"]), "--references", str(REFS)]
    assert runner.invoke(app, [*base, "--fail-under", "pass_at_k@1=0.7"]).exit_code == 0
    res = runner.invoke(app, [*base, "--fail-under", "pass_pow_k@3=0.9"])
    assert res.exit_code == 1
    assert "gate FAIL: pass_pow_k@3 unbiased estimate 0.500 < required" in res.stderr
    bad = tmp_path / "refs.yaml"
    bad.write_text("name: x\nreferences:\n  - id: a\n    turns: 3\n", encoding="utf-8")
    res = runner.invoke(app, ["evaluate", str(traces["v2"]), "--references", str(bad)])
    assert res.exit_code == 2
    assert "refs.yaml" in res.stderr


@pytest.mark.slow
def test_end_to_end_subprocess_evaluate_html_compare(
    traces: dict[str, Path], tmp_path: Path
) -> None:
    outs = {}
    for name in ("v1", "v2"):
        out = tmp_path / f"{name}.json"
        proc = subprocess.run(
            [str(TRACEPASS), "evaluate", str(traces[name]), "-r", str(REFS), "--format", "json"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        out.write_text(proc.stdout, encoding="utf-8")
        json.loads(proc.stdout)  # stdout is clean JSON
        outs[name] = out
    html = tmp_path / "report.html"
    proc = subprocess.run(
        [
            str(TRACEPASS),
            "evaluate",
            str(traces["v2"]),
            "-r",
            str(REFS),
            "--format",
            "html",
            "-o",
            str(html),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "<!DOCTYPE html>" in html.read_text(encoding="utf-8")

    proc = subprocess.run(
        [
            str(TRACEPASS),
            "compare",
            str(outs["v1"]),
            str(outs["v2"]),
            "--fail-on-regression",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    diff = json.loads(proc.stdout)
    assert diff["regressions"] == ["add"]
    assert diff["references"][0]["reference_id"] == "add"
    assert diff["overall"]["prob_candidate_better"] < 0.2
    res = runner.invoke(app, ["compare", str(outs["v2"]), str(outs["v1"]), "--fail-on-regression"])
    assert res.exit_code == 0, res.output
    assert "improved" in res.stdout


def _split_refs(tmp_path: Path) -> tuple[Path, Path]:
    """calc_refs.yaml as two files; `mul` does not check tools (tool_correctness null)."""
    add = tmp_path / "add.yaml"
    add.write_text(
        "name: calc-add\nreferences:\n  - id: add\n    turns:\n"
        "      - query: What is 15 + 27?\n        expected_answer: '42'\n"
        "        expected_tools:\n          - name: add\n            arguments: {a: 15, b: 27}\n",
        encoding="utf-8",
    )
    mul = tmp_path / "mul.yaml"
    mul.write_text(
        "name: calc-mul\nreferences:\n  - id: mul\n    turns:\n"
        "      - query: What is 6 times 7?\n        expected_answer: '42'\n",
        encoding="utf-8",
    )
    return add, mul


def test_evaluate_json_contract_and_references_with_several_values(
    traces: dict[str, Path], tmp_path: Path
) -> None:
    add, mul = _split_refs(tmp_path)
    trace = str(traces["v2"])
    fmt = ["--format", "json", "--k", "1,3", "--no-readiness-gate"]
    # The form: FILE… --references PATH…
    res = runner.invoke(app, ["evaluate", trace, "--references", str(add), str(mul), *fmt])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert_contract(doc, [1, 3])
    assert (doc["summary"]["matched"], doc["summary"]["unmatched"]) == (8, 1)
    mul_turns = [t for c in doc["conversations"] if c["reference_id"] == "mul" for t in c["turns"]]
    assert len(mul_turns) == 4
    for turn in mul_turns:
        assert turn["tool_correctness"] is None
        assert turn["trajectory"] == dict.fromkeys(
            ("exact", "in_order", "any_order", "precision", "recall", "f1")
        )
    add_turn = next(c for c in doc["conversations"] if c["reference_id"] == "add")["turns"][0]
    assert add_turn["trajectory"]["precision"] == 1.0
    # Repeating the option means the same.
    res = runner.invoke(app, ["evaluate", trace, "-r", str(add), "-r", str(mul), *fmt])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["summary"] == doc["summary"]
    # Options first, then a FILE: one reference path, one trace file (as before).
    res = runner.invoke(app, ["evaluate", "--references", str(add), trace, *fmt])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["summary"]["matched"] == 4


def test_evaluate_gate_on_lower_bound(traces: dict[str, Path]) -> None:
    # add: 2/4, mul: 4/4 -> unbiased pass^3 = 0.5; 8 trials leave a wide interval.
    base = ["evaluate", str(traces["v2"]), "-r", str(REFS), "--fail-under", "pass_pow_k@3=0.5"]
    res = runner.invoke(app, base)
    assert res.exit_code == 0, res.output
    assert "gate PASS: pass_pow_k@3 unbiased estimate 0.500 >= required 0.5" in res.stderr
    res = runner.invoke(app, [*base, "--gate-on", "lower", "--format", "json"])
    assert res.exit_code == 1
    (gate,) = json.loads(res.stdout)["gates"]
    assert gate["estimator"] == "lower"
    assert gate["passed"] is False
    assert gate["value"] == json.loads(res.stdout)["summary"]["pass_pow_k"]["3"]["lower"]
    assert "gate FAIL: pass_pow_k@3" in res.stderr


def test_progress_bar_on_a_terminal_keeps_stdout_json(traces: dict[str, Path]) -> None:
    """stderr is a real terminal (pty), so rich draws the bar; stdout stays pure JSON."""
    primary, secondary = os.openpty()
    chunks: list[bytes] = []

    def drain() -> None:  # read while the child runs: a full pty would block it
        while True:
            try:
                chunk = os.read(primary, 65536)
            except OSError:  # EIO: the child closed its end
                return
            if not chunk:
                return
            chunks.append(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        proc = subprocess.Popen(
            [str(TRACEPASS), "evaluate", str(traces["v1"]), "-r", str(REFS), "--format", "json"],
            stdout=subprocess.PIPE,
            stderr=secondary,
            env={**os.environ, "COLUMNS": "100", "TERM": "xterm"},
        )
        os.close(secondary)
        out, _ = proc.communicate(timeout=300)
        reader.join(timeout=60)
    finally:
        os.close(primary)
    err = b"".join(chunks)
    assert proc.returncode == 0, err.decode(errors="replace")
    assert json.loads(out)["summary"]["matched"] == 8
    assert b"evaluating" in err


def test_evaluate_sample_rate_keeps_what_the_collector_formula_keeps(
    traces: dict[str, Path],
) -> None:
    import hashlib

    def kept(cid: str) -> bool:
        digest = hashlib.sha256(f"ci:{cid}".encode()).digest()
        return int.from_bytes(digest[:8], "big") < 0.5 * 2**64

    every = runner.invoke(
        app, ["evaluate", str(traces["v2"]), "--references", str(REFS), "--format", "json"]
    )
    ids = [c["conversation_id"] for c in json.loads(every.stdout)["conversations"]]
    res = runner.invoke(
        app,
        [
            "evaluate",
            str(traces["v2"]),
            "--references",
            str(REFS),
            "--format",
            "json",
            "--sample-rate",
            "0.5",
            "--sample-seed",
            "ci",
        ],
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert sorted(c["conversation_id"] for c in doc["conversations"]) == sorted(
        i for i in ids if kept(i)
    )
    assert doc["run"]["sample_rate"] == 0.5
    assert "sampling:" in res.stderr
