"""`tracepass inspect`: table and JSON over a real-framework corpus file, exit 2 on a
malformed file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tracepass.collector.app.cli.main import app

CORPUS = Path(__file__).resolve().parents[1] / "frameworks" / "corpus"
runner = CliRunner()


def test_json_reports_provenance_per_span_and_no_warnings() -> None:
    res = runner.invoke(
        app, ["inspect", str(CORPUS / "strands_native.otlp.jsonl"), "--format", "json"]
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["warning_count"] == 0
    assert doc["spans_by_adapter"]["strands"] > 0
    turn = doc["conversations"][0]["turns"][0]
    assert {c["arguments_source"] for c in turn["tool_calls"]} == {"span_event"}
    tools = [s for s in turn["spans"] if s["kind"] == "tool"]
    assert tools[0]["fields"]["tool_result"] == "adapter"


def test_table_shows_warnings_of_a_stack_without_content() -> None:
    res = runner.invoke(app, ["inspect", str(CORPUS / "autogen_native.otlp.jsonl")])
    assert res.exit_code == 0, res.output
    assert "no query found" in res.stdout
    assert "warning(s)" in res.stdout


def test_malformed_file_exits_2_with_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"resourceSpans": [}\n')
    res = runner.invoke(app, ["inspect", str(bad)])
    assert res.exit_code == 2
    assert f"{bad}:1" in res.output


def test_table_numbers_turns_from_1() -> None:
    res = runner.invoke(
        app, ["inspect", str(CORPUS / "strands_native.otlp.jsonl")], env={"COLUMNS": "200"}
    )
    assert res.exit_code == 0, res.output
    assert "· turn 1" in res.stdout
    assert "· turn 0" not in res.stdout


@pytest.mark.slow  # starts a process or a server
def test_unknown_reference_id_is_a_warning_with_references(tmp_path: Path) -> None:
    """A misspelled reference_id would silently fall back to query matching: with
    --references, inspect warns on that conversation and suggests the close id."""
    import os
    import subprocess
    import sys

    traces = tmp_path / "traces.jsonl"
    agent = (
        "from tracepass.instrumentation import agent, configure, conversation, shutdown\n"
        f"configure(service_name='t', record_to={str(traces)!r})\n"
        "@agent(name='weather', version='1')\n"
        "def answer(q: str) -> str:\n"
        "    return 'sunny'\n"
        "with conversation('c-typo', reference_id='wether-sf'):\n"
        "    answer('weather?')\n"
        "with conversation('c-right', reference_id='weather-sf'):\n"
        "    answer('weather?')\n"
        "shutdown()\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", agent],
        env={**env, "OTEL_TRACES_EXPORTER": "none"},
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    refs = tmp_path / "refs.yaml"
    refs.write_text(
        "name: quickstart\nreferences:\n  - id: weather-sf\n    turns:\n"
        "      - query: weather?\n        expected_answer: sunny\n",
        encoding="utf-8",
    )
    res = runner.invoke(
        app, ["inspect", str(traces), "--references", str(refs), "--format", "json"]
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    by_id = {c["id"]: c for c in doc["conversations"]}
    assert by_id["c-typo"]["reference_id"] == "wether-sf"
    assert by_id["c-typo"]["warnings"] == [
        "reference_id 'wether-sf' is in none of the references (it would be matched by its "
        "query instead); did you mean 'weather-sf'?"
    ]
    assert by_id["c-right"]["warnings"] == []
    table = runner.invoke(app, ["inspect", str(traces), "-r", str(refs)], env={"COLUMNS": "200"})
    assert "⚠ conversation c-typo: reference_id 'wether-sf' is in none" in table.stdout
