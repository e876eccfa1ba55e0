"""The PromQL recording rules documented in docs/exported-metrics.md: valid for
promtool, and recomputing pooled pass^k / pass@k / Wilson bounds from summed counters
exactly as tracepass.evaluator.passk does (including revisions and the guard)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from conftest import require_tool
from tracepass.evaluator.passk import estimate

DOC = Path(__file__).resolve().parents[2] / "docs" / "exported-metrics.md"
LABELS = 'agent_name="a",agent_version="1",reference_set="r"'

pytestmark = pytest.mark.system


def rules_block() -> str:
    match = re.search(r"```yaml\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert match, "docs/exported-metrics.md lost its recording-rules block"
    return match.group(1)


def series(name: str, outcome: str, per_minute: float) -> str:
    return (
        f"      - series: '{name}{{{LABELS},outcome=\"{outcome}\"}}'\n"
        f"        values: '0+{per_minute}x120'\n"
    )


def expect(expr: str, value: float | None, k: bool = False) -> str:
    extra = ',k="3"' if k else ""
    samples = (
        f"          - labels: '{expr}{{{LABELS}{extra}}}'\n            value: {value!r}\n"
        if value is not None
        else ""
    )
    return f"      - expr: {expr}\n        eval_time: 90m\n        exp_samples:\n" + (
        samples or "          []\n"
    )


def wilson_upper(n: float, c: float) -> float:
    z2, p = 3.8416, c / n
    return (p + z2 / (2 * n) + 1.96 * (p * (1 - p) / n + z2 / (4 * n * n)) ** 0.5) / (1 + z2 / n)


def run_promtool(tmp_path: Path, inputs: str, checks: str) -> None:
    promtool = require_tool("promtool")
    (tmp_path / "rules.yml").write_text(rules_block(), encoding="utf-8")
    test = (
        "rule_files: [rules.yml]\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n"
        "    input_series:\n" + inputs + "    promql_expr_test:\n" + checks
    )
    (tmp_path / "test.yml").write_text(test, encoding="utf-8")
    check = subprocess.run(
        [promtool, "check", "rules", "rules.yml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    result = subprocess.run(
        [promtool, "test", "rules", "test.yml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_pooled_pass_k_from_counters(tmp_path: Path) -> None:
    # 60 minutes in the window: 480 passes, 120 failures, 300 errors (not trials).
    n, c = 600.0, 480.0
    ref = estimate(n, c, 3)
    inputs = (
        series("tracepass_conversations_total", "pass", 8)
        + series("tracepass_conversations_total", "fail", 2)
        + series("tracepass_conversations_total", "error", 5)
    )
    checks = (
        expect("agent:tracepass_conversations:net_increase1h", n)
        + expect("agent:tracepass_conversation_passes:net_increase1h", c)
        + expect("agent:tracepass_pass_rate:ratio1h", c / n)
        + expect("agent:tracepass_pass_pow_k:ratio1h", ref.pass_pow_k.plugin, k=True)
        + expect("agent:tracepass_pass_at_k:ratio1h", ref.pass_at_k.plugin, k=True)
        + expect("agent:tracepass_pass_rate_wilson_upper:ratio1h", wilson_upper(n, c))
    )
    run_promtool(tmp_path, inputs, checks)


def test_revisions_are_netted_out(tmp_path: Path) -> None:
    # 540 pass + 120 fail evaluations, of which 60 failures were superseded by passes.
    inputs = (
        series("tracepass_conversations_total", "pass", 9)
        + series("tracepass_conversations_total", "fail", 2)
        + series("tracepass_conversations_superseded_total", "fail", 1)
    )
    checks = expect("agent:tracepass_conversations:net_increase1h", 600.0) + expect(
        "agent:tracepass_pass_rate:ratio1h", 0.9
    )
    run_promtool(tmp_path, inputs, checks)


def test_minimum_sample_guard(tmp_path: Path) -> None:
    inputs = series("tracepass_conversations_total", "pass", 0.25)  # 15 per hour < 20
    checks = expect("agent:tracepass_pass_rate:ratio1h", None) + expect(
        "agent:tracepass_pass_pow_k:ratio1h", None, k=True
    )
    run_promtool(tmp_path, inputs, checks)
