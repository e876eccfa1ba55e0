"""The conversation timeline and the overview's cost and latency, in real headless
Chromium against a real `tracepass serve` fed the corpus's OTLP of three frameworks that
record token usage: every figure on the page is the API's, and the page needs no script
(it must work under a Content-Security-Policy that allows none).

Screenshots land in the test's tmp dir; set TRACEPASS_UI_SCREENSHOTS=<dir> to keep them.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import pytest
from _live_support import FAST_CONFIG, http_get, scrape, serve, total, wait_until
from test_cost_latency_e2e import FRAMEWORKS, INPUT_RATE, MODEL, OUTPUT_RATE, _post, _request
from test_ui_chromium import _render

from conftest import require_tool
from tracepass.collector.api.ui.pages import _secs, _usd

pytestmark = [pytest.mark.slow, pytest.mark.system, pytest.mark.timeout(400)]


def _cell(dom: str, element_id: str) -> str:
    m = re.search(rf'id="{element_id}"[^>]*>(.*?)</td>', dom, re.S)
    assert m, f"no #{element_id} on the page"
    return html.unescape(re.sub(r"<[^>]+>", "", m.group(1))).strip()


def _rows(dom: str) -> list[str]:
    return re.findall(r'<tr class="span-row[^"]*"[^>]*>(.*?)</tr>', dom, re.S)


def test_timeline_and_overview_show_the_api_figures(tmp_path: Path) -> None:
    chromium = require_tool("chromium")
    config = {
        **FAST_CONFIG,
        "pricing": {
            "models": {MODEL: {"input_per_mtok": INPUT_RATE, "output_per_mtok": OUTPUT_RATE}}
        },
    }
    with serve(tmp_path, config=config) as s:
        for name in FRAMEWORKS:
            _post(f"{s.http}/v1/traces", _request(name))
        wait_until(
            lambda: total(scrape(s.metrics_url), "tracepass_conversations_total") >= 3 or None,
            120,
            "three evaluated conversations",
        )
        for n, name in enumerate(FRAMEWORKS):
            cid = f"conv-{name}"
            status, body = http_get(f"{s.http}/api/v1/conversations/{cid}")
            assert status == 200, body
            view: dict[str, Any] = json.loads(body)
            dom = _render(
                chromium,
                f"{s.http}/ui/conversations/{cid}",
                tmp_path / f"timeline-{n}-{name}.png",
                tmp_path / f"profile-{n}",
            )
            usage = view["usage"]
            assert _cell(dom, "cost") == _usd(usage["cost_usd"])
            assert _cell(dom, "duration") == _secs(view["duration_s"])
            assert _cell(dom, "model-calls") == str(usage["model_calls"])
            assert _cell(dom, "input-tokens") == f"{usage['input_tokens']:,}"
            spans = [sp for t in view["turns"] for sp in t["spans"]]
            rows = _rows(dom)
            assert len(rows) == len(spans)
            model_rows = [r for r in rows if '<span class="kind">model</span>' in r]
            models = [sp for sp in spans if sp["kind"] == "model"]
            assert len(model_rows) == len(models) == usage["model_calls"]
            for row, sp in zip(model_rows, models, strict=True):
                assert _usd(sp["cost_usd"]) in row
                assert f"{sp['input_tokens']:,} / {sp['output_tokens']:,}" in row
                assert _secs(sp["duration_s"]) in row
                assert '<rect class="bar"' in row
            # Nothing for a CSP to block: no script, no inline event handlers.
            section = dom[dom.index('id="cost-latency"') :]
            assert "<script" not in section
            assert not re.search(r"\son[a-z]+=", section)

        summary = json.loads(http_get(f"{s.http}/api/v1/references/summary")[1])
        by_version = {v["agent_version"]: v for v in summary["versions"]}
        assert set(by_version) == set(FRAMEWORKS)
        dom = _render(chromium, f"{s.http}/ui/", tmp_path / "overview.png", tmp_path / "p-o")
        cells = re.findall(
            r'<td>[^<]*</td><td>([^<]*)</td>.*?class="num cost-per-conversation">(.*?)</td>\s*'
            r'<td class="num latency-p95">(.*?)</td>',
            dom,
            re.S,
        )
        shown = {version: (html.unescape(cost), html.unescape(p95)) for version, cost, p95 in cells}
        for version, figures in by_version.items():
            assert shown[version] == (
                _usd(figures["cost_usd_mean"]),
                _secs(figures["duration_s_p95"]),
            )
        assert s.terminate() == 0, s.stderr()
