"""HTML report: numbers behind the charts, escaping, and a real headless-Chromium render."""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

import pytest
from _cli_factories import conversation, results_doc

from conftest import require_tool
from tracepass.collector.app.report import data, render_report
from tracepass.evaluator.offline.evaluation_run import build_document


def _doc() -> dict[str, object]:
    v1 = [conversation(f"a{i}", "a", True, version="1.0") for i in range(4)]
    v1 += [conversation(f"b{i}", "b", i % 2 == 0, version="1.0") for i in range(4)]
    v2 = [conversation(f"c{i}", "a", i == 0, version="2.0") for i in range(4)]
    v2 += [conversation(f"d{i}", "b", False, version="2.0") for i in range(4)]
    return build_document(v1 + v2, (1, 3, 5))


def test_curves_per_version_match_estimators() -> None:
    curves = {c.label: c for c in data.curves(_doc(), 5)}
    assert set(curves) == {"calc-agent 1.0", "calc-agent 2.0"}
    v1 = curves["calc-agent 1.0"]
    assert v1.ks == [1, 2, 3, 4, 5]
    assert v1.trials == 8
    # Pooled posterior Beta(6 + 1, 2 + 1): mean of p is 7/10.
    assert v1.at_mean[0] == pytest.approx(0.7)
    # Unbiased pass^2 per task: a = 1, b = C(2,2)/C(4,2) = 1/6; mean = 7/12.
    assert v1.pow_unbiased[1] == pytest.approx(7 / 12)
    assert v1.pow_unbiased[4] is None  # no task has 5 trials
    for lo, mean, hi in zip(v1.pow_lower, v1.pow_mean, v1.pow_upper, strict=True):
        assert lo is not None
        assert hi is not None
        assert mean is not None
        assert lo <= mean <= hi


def test_breakdowns_and_failures() -> None:
    doc = _doc()
    by_ref = data.tool_by_reference(doc)
    assert next(iter(by_ref)) == "b"  # worst first
    assert by_ref["a"]["selection"] == pytest.approx(1.0)
    radar = data.trajectory_by_version(doc)
    assert radar["calc-agent 1.0"]["exact"] == pytest.approx(6 / 8)
    rows, total = data.failures(doc)
    assert total == 2 + 3 + 4
    assert rows[0].expected_tools is not None
    assert [c.text for c in rows[0].expected_tools] == ["calculator(a=15, b=27)"]
    assert [c.text for c in rows[0].actual_tools] == ["calculator(a=15, b=26)"]
    # The differing argument is the one highlighted, on both sides.
    assert rows[0].expected_tools[0].marked == ["b=27"]
    assert rows[0].actual_tools[0].marked == ["b=26"]
    # The radar has an arguments axis: right tools, wrong arguments is not perfect.
    assert radar["calc-agent 1.0"]["arguments"] < 1.0


def test_failures_sort_naturally() -> None:
    convs = [conversation(f"demo-0-{i}", "a", False) for i in (199, 20, 3)]
    rows, _ = data.failures(build_document(convs, (1,)))
    assert [r.conversation_id for r in rows] == ["demo-0-3", "demo-0-20", "demo-0-199"]
    rows, total = data.failures(build_document(convs, (1,)), limit=1)
    assert ([r.conversation_id for r in rows], total) == (["demo-0-3"], 3)


def test_headline_verdict_is_per_agent_version() -> None:
    html = render_report(_doc())
    verdicts = {label: v["tier"] for label, v in data.readiness_by_version(_doc()).items()}
    assert set(verdicts) == {"calc-agent 1.0", "calc-agent 2.0"}
    assert verdicts["calc-agent 2.0"] == "needs_improvement"
    assert "Readiness per agent version" in html
    assert html.count('class="version-verdict"') == 2
    assert "<mark>b=26</mark>" in html


def test_untrusted_text_is_escaped() -> None:
    html = render_report(results_doc({"a": [False]}))
    assert "<b>41</b>" not in html
    assert "&lt;b&gt;41&lt;/b&gt;" in html


def test_empty_document_renders() -> None:
    html = render_report(build_document([], (1,)))
    assert "No matched conversations." in html
    assert "insufficient data" in html


def _png_size(path: Path) -> tuple[int, int]:
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", header[16:24])
    return int(width), int(height)


@pytest.mark.system
def test_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    chromium = require_tool("chromium")
    page = tmp_path / "report.html"
    page.write_text(render_report(_doc()), encoding="utf-8")
    shot = tmp_path / "report.png"
    subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile'}",
            f"--screenshot={shot}",
            "--window-size=1280,2000",
            page.as_uri(),
        ],
        check=True,
        timeout=120,
        capture_output=True,
    )
    assert shot.exists()
    assert _png_size(shot) == (1280, 2000)
    # A blank page compresses to a few KB; charts and tables make it far larger.
    assert shot.stat().st_size > 50_000


def test_turns_without_tool_checks_stay_out_of_the_radar() -> None:
    """A turn whose tools are not checked has a trajectory of nulls: it is not a
    trajectory score of 0 and must not pull the radar down."""
    from tracepass.evaluator.models import ConversationResult, Outcome, TurnResult

    unchecked = ConversationResult(
        conversation_id="u",
        reference_id="a",
        agent_name="calc-agent",
        agent_version="1.0",
        correct=True,
        outcome=Outcome.PASS,
        turns=(
            TurnResult(
                index=0, query="hi", answer="hello", answer_score=1.0, answer_correct=True,
                tool_correctness=None, correct=True,
            ),
        ),
    )  # fmt: skip
    doc = build_document([conversation("c", "a", True), unchecked], (1,))
    assert doc["conversations"][1]["turns"][0]["trajectory"]["f1"] is None
    assert data.trajectory_by_version(doc) == {
        "calc-agent 1.0": {axis: 1.0 for axis in data.TRAJECTORY_AXES}
    }
    assert "<html" in render_report(doc).lower()
