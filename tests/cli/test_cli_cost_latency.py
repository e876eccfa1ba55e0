"""Offline tokens, cost and latency: `tracepass evaluate --pricing` (JSON and HTML),
`tracepass compare`'s cost_latency, `tracepass conversations`' usage, and a bad pricing
file (exit 2 with file:line)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tracepass.collector.app.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "frameworks" / "corpus"
REFS = str(ROOT / "examples" / "references")
runner = CliRunner()

PRICING = """\
pricing:
  models:
    scripted-travel-model: {input_per_mtok: 2.0, output_per_mtok: 8.0}
"""
# From the corpus files (tests/e2e/test_cost_latency_e2e.py computes them from the spans).
STRANDS = {"input": 3370, "output": 84, "calls": 6}
PYDANTIC = {"input": 532, "output": 208, "calls": 6}


def _cost(t: dict[str, int]) -> float:
    return (t["input"] * 2.0 + t["output"] * 8.0) / 1e6


def _evaluate(tmp_path: Path, scenario: str, *extra: str) -> dict[str, Any]:
    pricing = tmp_path / "pricing.yaml"
    pricing.write_text(PRICING)
    out = tmp_path / f"{scenario}.json"
    res = runner.invoke(
        app,
        [
            "evaluate", str(CORPUS / f"{scenario}.otlp.jsonl"), "-r", REFS,
            "--pricing", str(pricing), "--format", "json", "-o", str(out), "--no-progress",
            *extra,
        ],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    doc: dict[str, Any] = json.loads(out.read_text())
    return doc


def test_evaluate_reports_tokens_cost_and_latency_per_version(tmp_path: Path) -> None:
    doc = _evaluate(tmp_path, "strands_native")
    (entry,) = doc["cost_latency"]
    assert entry["conversations"] == entry["priced"] == 1
    assert entry["model_calls"] == STRANDS["calls"]
    assert entry["tokens"]["input_tokens"] == STRANDS["input"]
    assert entry["tokens"]["output_tokens"] == STRANDS["output"]
    assert entry["tokens"]["reasoning_tokens"] is None
    assert entry["cost_usd_mean"] == pytest.approx(_cost(STRANDS))
    assert entry["duration_s_p95"] > 0


def test_without_pricing_the_unknown_model_has_no_cost(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    res = runner.invoke(
        app,
        [
            "evaluate", str(CORPUS / "strands_native.otlp.jsonl"), "-r", REFS,
            "--format", "json", "-o", str(out), "--no-progress",
        ],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    (entry,) = json.loads(out.read_text())["cost_latency"]
    assert (entry["priced"], entry["cost_usd_mean"]) == (0, None)
    assert entry["tokens"]["input_tokens"] == STRANDS["input"]


def test_html_report_shows_the_cost_table(tmp_path: Path) -> None:
    pricing = tmp_path / "pricing.yaml"
    pricing.write_text(PRICING)
    out = tmp_path / "report.html"
    res = runner.invoke(
        app,
        [
            "evaluate", str(CORPUS / "strands_native.otlp.jsonl"), "-r", REFS,
            "--pricing", str(pricing), "--format", "html", "-o", str(out), "--no-progress",
        ],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    page = out.read_text()
    assert 'id="cost-latency"' in page
    assert _cost(STRANDS) == pytest.approx(0.007412)
    assert "$0.00741" in page  # plain dollars, three significant digits (issue 40 item 6)
    assert "3,370" in page


def test_compare_reports_cost_and_latency_changes(tmp_path: Path) -> None:
    base = _evaluate(tmp_path, "strands_native")
    cand = _evaluate(tmp_path, "pydantic_ai_native")
    (tmp_path / "a.json").write_text(json.dumps(base))
    (tmp_path / "b.json").write_text(json.dumps(cand))
    res = runner.invoke(
        app, ["compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--format", "json"]
    )
    assert res.exit_code == 0, res.output
    block = json.loads(res.stdout)["cost_latency"]
    assert block["delta"]["cost_usd_mean"] == pytest.approx(_cost(PYDANTIC) - _cost(STRANDS))
    table = runner.invoke(app, ["compare", str(tmp_path / "a.json"), str(tmp_path / "b.json")])
    assert "cost / conversation (USD)" in table.stdout
    assert "latency p95 (s)" in table.stdout


def test_bad_pricing_file_exits_2_with_its_line(tmp_path: Path) -> None:
    bad = tmp_path / "pricing.yaml"
    bad.write_text("pricing:\n  models:\n    m: {input_per_mtok: -1, output_per_mtok: 1}\n")
    res = runner.invoke(
        app,
        [
            "evaluate", str(CORPUS / "strands_native.otlp.jsonl"), "-r", REFS,
            "--pricing", str(bad), "--no-progress",
        ],
    )  # fmt: skip
    assert res.exit_code == 2
    assert f"{bad}:3:" in res.output
    assert "input_per_mtok" in res.output


def test_conversations_prints_usage_and_timeline(tmp_path: Path) -> None:
    res = runner.invoke(
        app, ["conversations", str(CORPUS / "pydantic_ai_native.otlp.jsonl"), "--format", "json"]
    )
    assert res.exit_code == 0, res.output
    (conv,) = json.loads(res.stdout)["conversations"]
    assert conv["usage"]["input_tokens"] == PYDANTIC["input"]
    assert conv["usage"]["cost_usd"] is None  # not in the library, no --pricing here
    assert "unknown_model" in conv["usage"]["missing"]["cost_usd"]
    assert conv["duration_s"] > 0
    kinds = {sp["kind"] for t in conv["turns"] for sp in t["spans"]}
    assert {"turn", "model", "tool"} <= kinds
