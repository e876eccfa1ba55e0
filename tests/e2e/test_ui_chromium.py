"""The web UI end to end: a real `tracepass serve` fed over real OTLP by the example agent
(1.0 healthy, 1.1 regressed), every page rendered by headless Chromium, its DOM checked
for content (numbers the API returns, the wrong argument highlighted, trace links from
the template, filters applied) and a screenshot taken of each page.

Screenshots land in the test's tmp dir; set TRACEPASS_UI_SCREENSHOTS=<dir> to keep them.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from _live_support import FAST_CONFIG, http_get, run_agent, serve, wait_until

from conftest import require_tool

pytestmark = [pytest.mark.slow, pytest.mark.system, pytest.mark.timeout(400)]

REFS = str(Path(__file__).resolve().parents[2] / "examples" / "references")
N = 20
TRACE_TEMPLATE = "http://jaeger.example/trace/{trace_id}"
# Version 1.1 may not convert currencies: its conversations that do carry a violation.
POLICY = """
policies:
  - id: no-fx
    agent: travel-assistant
    version: "1.1"
    rules:
      - {type: forbidden_tool, name: convert_currency}
"""


def _render(chromium: str, url: str, shot: Path | None, profile: Path) -> str:
    """The page's DOM after load (and a screenshot of it, unless `shot` is None)."""
    done = subprocess.run(
        [
            chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
            "--no-first-run", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", f"--user-data-dir={profile}",
            *([f"--screenshot={shot}"] if shot is not None else []),
            "--window-size=1300,1600", "--dump-dom", url,
        ],
        check=True, timeout=120, capture_output=True, text=True,
    )  # fmt: skip
    if shot is None:
        return done.stdout
    assert shot.exists(), f"no screenshot of {url}"
    assert shot.stat().st_size > 10_000, f"blank screenshot of {url}"
    keep = os.environ.get("TRACEPASS_UI_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(keep) / shot.name)
    return done.stdout


def _text(dom: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", dom))


def _api(base: str, path: str, **params: str) -> dict[str, Any]:
    status, body = http_get(f"{base}{path}?{urlencode(params)}")
    assert status == 200, body
    return dict(json.loads(body))


def test_ui_pages_render_filter_and_link(tmp_path: Path) -> None:
    chromium = require_tool("chromium")
    config = {**FAST_CONFIG, "ui": {"trace_url_template": TRACE_TEMPLATE}}
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY, encoding="utf-8")
    with serve(tmp_path, "--references", REFS, "--references", str(policy), config=config) as s:
        run_agent(s.http, "run", "--conversations", str(N), "--version", "1.0", "--prefix", "good-")
        run_agent(
            s.http, "run", "--conversations", str(N), "--version", "1.1",
            "--regression", "0.7", "--prefix", "bad-", "--seed", "7",
        )  # fmt: skip

        def listed() -> list[dict[str, Any]] | None:
            rows = _api(s.http, "/api/v1/conversations", limit="500")["conversations"]
            return rows if len(rows) >= 2 * N else None

        rows = wait_until(listed, 120, f"{2 * N} listed conversations")
        failing = [r for r in rows if r["outcome"] == "fail"]
        assert failing
        assert all(r["agent_version"] == "1.1" for r in failing)

        def page(name: str, path: str) -> str:
            return _render(chromium, s.http + path, tmp_path / f"ui-{name}.png", tmp_path / "p")

        # Overview: both versions with pass^k, the 1.1 row below 1.0, the trend chart.
        overview = page("overview", "/ui/")
        text = _text(overview)
        # A "failing" link only where something failed (1.0 passes everything here).
        row_of = {
            m.group(1): m.group(0)
            for m in re.finditer(
                r'<tr class="agent-row">\s*<td>[^<]*</td><td>([^<]*)</td>.*?</tr>', overview, re.S
            )
        }
        assert ">failing</a>" in row_of["1.1"]
        assert ">failing</a>" not in row_of["1.0"]
        # Readiness in the one rule's words, its reason as the tooltip (docs/metrics.md).
        for row in row_of.values():
            cell = re.search(
                r'<td class="readiness ([a-z_]+)" title="[^"]*pass\^3[^"]*">([^<]+)</td>', row
            )
            assert cell, row
            assert cell.group(2) == cell.group(1).replace("_", " ")
        # The trend chart spans the content width; the interval bars carry their scale.
        assert re.search(r'<svg class="trend" viewBox="0 0 \d+ \d+" width="100%"', overview)
        bar = re.search(r'<svg class="interval-bar".*?</svg>', overview, re.S)
        assert bar
        assert [t for t in re.findall(r">([0-9.]+)</text>", bar.group(0))] == ["0", "0.5", "1"]
        assert "travel-assistant" in text
        assert "pass^3" in text
        agents = _api(s.http, "/api/v1/agents")["agents"]
        shown = [a for a in agents if a["windows"]["5m"]["sufficient"]]
        assert {a["agent_version"] for a in shown} == {"1.0", "1.1"}
        for a in shown:
            mean = a["windows"]["5m"]["pass_pow_k"]["3"]["mean"]
            assert f"{mean:.2f}" in text
        assert "Pass rate over the 5m window" in text

        # Failing list, filtered to 1.1 fails: exactly the API's rows, each linked.
        query = {"agent_version": "1.1", "outcome": "fail"}
        dom = page("failing", "/ui/conversations?" + urlencode(query))
        listed_ids = re.findall(
            r'class="conversation-row">\s*<td><a href="/ui/conversations/([^"]+)"', dom
        )
        api_ids = [
            r["conversation_id"]
            for r in _api(s.http, "/api/v1/conversations", **query)["conversations"]
        ]
        assert listed_ids == api_ids
        assert set(listed_ids) == {r["conversation_id"] for r in failing}
        other = page(
            "pass-1.0",
            "/ui/conversations?" + urlencode({"agent_version": "1.0", "outcome": "pass"}),
        )
        assert "bad-" not in _text(other)
        assert "good-" in _text(other)

        # One failing conversation: the differing argument value is highlighted, and
        # each trace id links through the template.
        target = next(r for r in failing if any(": expected " in x for x in r["reasons"]))
        reason = next(x for x in target["reasons"] if ": expected " in x)
        wrong = reason.rsplit(", got ", 1)[1]
        dom = page("conversation", f"/ui/conversations/{target['conversation_id']}")
        marks = [html.unescape(m) for m in re.findall(r"<mark>([^<]*)</mark>", dom)]
        assert wrong in marks, (wrong, marks)
        for trace_id in target["trace_ids"]:
            assert f'href="{TRACE_TEMPLATE.replace("{trace_id}", trace_id)}"' in dom
        assert reason in _text(dom)
        assert "Tool trajectory" in dom
        assert "expected (reference)" in dom

        # Regression table 1.1 vs 1.0: the API's per-task numbers.
        params = {
            "agent_name": "travel-assistant",
            "agent_version": "1.1",
            "baseline_version": "1.0",
            "window": "5m",
        }
        dom = page("regressions", "/ui/regressions?" + urlencode(params))
        text = _text(dom)
        # The form suggests the versions the collector knows.
        known = re.search(r'<datalist id="known-versions">(.*?)</datalist>', dom, re.S)
        assert known is not None
        assert re.findall(r'value="([^"]+)"', known.group(1)) == ["1.0", "1.1"]
        summary = _api(s.http, "/api/v1/references/summary", **params)["references"]
        assert summary
        for r in summary:
            assert r["reference_id"] in text
        worst = summary[0]
        assert worst["delta"] < 0
        assert f"{worst['delta']:+.2f}" in text

        # Policy violations: the violation filter in the UI lists the API's rows, and the
        # conversation page names the rule.
        flagged = _api(s.http, "/api/v1/conversations", violation="forbidden_tool", limit="500")
        flagged_ids = [r["conversation_id"] for r in flagged["conversations"]]
        assert flagged_ids
        assert all(r["agent_version"] == "1.1" for r in flagged["conversations"])
        dom = page(
            "violations",
            "/ui/conversations?" + urlencode({"violation": "forbidden_tool", "outcome": "any"}),
        )
        listed_ids = re.findall(
            r'class="conversation-row">\s*<td><a href="/ui/conversations/([^"]+)"', dom
        )
        assert listed_ids == flagged_ids[: len(listed_ids)]
        assert len(listed_ids) == min(len(flagged_ids), 50)
        text = _text(page("violation-page", f"/ui/conversations/{flagged_ids[0]}"))
        assert "Policy violations" in text
        assert "forbidden_tool" in text

        # A bad filter is a page naming the parameter, not a crash.
        assert "outcome: 'nope'" in _text(page("bad-filter", "/ui/conversations?outcome=nope"))
        # One logfmt line per failing conversation on the tracepass.failures logger.
        logged = [line for line in s.stderr().splitlines() if "conversation_failed" in line]
        assert len(logged) == len(failing)
        line = next(x for x in logged if f"conversation_id={target['conversation_id']} " in x)
        assert "tracepass.failures" in line
        assert "agent_version=1.1 " in line
        assert "outcome=fail " in line
        assert f"trace_ids={','.join(target['trace_ids'])}" in line
        assert reason.split(": ", 1)[1] in line
        s.terminate()


def test_ui_behind_the_bearer_token_opens_in_a_browser_with_basic_auth(tmp_path: Path) -> None:
    """With `receiver.bearer_token`, a browser gets the UI by answering the Basic
    challenge with the token as the password; without it, the 401."""
    chromium = require_tool("chromium")
    config = {**FAST_CONFIG, "receiver": {"bearer_token": "s3cret"}}
    with serve(tmp_path, "--references", REFS, config=config) as s:
        port = s.ports["http_port"]
        dom = _render(
            chromium,
            f"http://ui:s3cret@127.0.0.1:{port}/ui/",
            tmp_path / "ui-auth.png",
            tmp_path / "p1",
        )
        assert "<h1>Agents</h1>" in dom
        # Without credentials headless Chromium gets the challenge and shows nothing.
        denied = _render(chromium, f"http://127.0.0.1:{port}/ui/", None, tmp_path / "p2")
        assert "Agents" not in denied
        status, body = http_get(f"http://127.0.0.1:{port}/ui/")
        assert status == 401
        assert b"missing bearer token" in body
        s.terminate()
