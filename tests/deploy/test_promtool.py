"""The Prometheus rules pass `promtool check rules` and their unit tests, and every alert
is tested (fires at least once, and has quiet/too-few-samples cases) and documented."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import require_tool

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "tracepass.rules.yaml"
TESTS = sorted((ROOT / "deploy" / "prometheus" / "tests").glob("*.yaml"))
OPERATIONS = ROOT / "docs" / "operations.md"

pytestmark = pytest.mark.system


def _rules() -> list[dict[str, Any]]:
    doc = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    return [rule for group in doc["groups"] for rule in group["rules"]]


def _alerts() -> list[dict[str, Any]]:
    return [r for r in _rules() if "alert" in r]


def _run(*args: str) -> str:
    proc = subprocess.run(
        [require_tool("promtool"), *args],
        capture_output=True,
        text=True,
        timeout=600,  # promtool test rules takes minutes on a loaded 2-core machine
        cwd=ROOT,
        check=False,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    return out


def test_promtool_check_rules() -> None:
    out = _run("check", "rules", str(RULES))
    assert f"SUCCESS: {len(_rules())} rules found" in out


def test_promtool_test_rules() -> None:
    assert TESTS
    out = _run("test", "rules", *map(str, TESTS))
    assert out.count("SUCCESS") == len(TESTS), out


def _alert_cases() -> list[tuple[str, bool]]:
    """(alertname, expects firing) of every alert_rule_test case in the unit tests."""
    cases = []
    for path in TESTS:
        for test in yaml.safe_load(path.read_text(encoding="utf-8"))["tests"]:
            for case in test.get("alert_rule_test") or []:
                cases.append((case["alertname"], bool(case.get("exp_alerts"))))
    return cases


@pytest.mark.parametrize("alert", _alerts(), ids=lambda a: a["alert"])
def test_every_alert_is_unit_tested(alert: dict[str, Any]) -> None:
    cases = [fires for name, fires in _alert_cases() if name == alert["alert"]]
    assert True in cases, f"{alert['alert']}: no test case where it fires"
    assert False in cases, f"{alert['alert']}: no test case where it stays silent"


@pytest.mark.parametrize("alert", _alerts(), ids=lambda a: a["alert"])
def test_every_alert_is_documented(alert: dict[str, Any]) -> None:
    assert alert["labels"]["severity"] in {"critical", "warning", "info"}
    assert {"summary", "description", "runbook_url"} <= set(alert["annotations"])
    assert "for" in alert
    assert "keep_firing_for" in alert
    # Absolute on ui.external_url (tracepass_ui_info) where the UI serves the runbook,
    # docs/operations.md rendered with GitHub's anchors (api/ui/runbook.py).
    url = alert["annotations"]["runbook_url"]
    base = (
        '{{ with query "max by (url) (tracepass_ui_info)" }}'
        '{{ . | first | label "url" }}{{ else }}/ui{{ end }}'
    )
    assert url == f"{base}/runbook#{alert['alert'].lower()}"
    headings = re.findall(r"^#+ (.+)$", OPERATIONS.read_text(encoding="utf-8"), re.M)
    assert alert["alert"] in [h.strip().strip("`") for h in headings], (
        f"docs/operations.md has no runbook section for {alert['alert']}"
    )
    from tracepass.collector.api.ui.runbook import heading_anchor, render_runbook

    assert heading_anchor(alert["alert"]) == alert["alert"].lower()
    assert f'<h3 id="{alert["alert"].lower()}">{alert["alert"]}</h3>' in render_runbook()
