"""The review queue driven in real headless Chromium against a real `tracepass serve`
fed over real OTLP (scripted agent, real judge with a scripted model).

A person queues a passing conversation with the conversation page's button, labels it
on the queue page, then labels the failing conversation the rules queued; the
overview's people-vs-judges table changes with each label (κ "—" with one label, then
1.00 for tracepass's verdict and 0.00 for the always-passing judge). A hostile page on
another origin making the same browser post a label is refused, and without
`api.write_token` the pages show no buttons.
"""

from __future__ import annotations

import asyncio
import base64
import re
from pathlib import Path
from urllib.parse import quote

import aiohttp
import pytest
from _live_support import http_get, serve, wait_until
from test_review_e2e import evaluated, judge_env, review_config, run_agent, write_refs
from test_triage_chromium import Cdp, _browser, _dump, _hostile_site, _page_socket, _text

from conftest import require_tool

pytestmark = [pytest.mark.slow, pytest.mark.system, pytest.mark.timeout(600)]

WRITE_TOKEN = "review-token"
PASSING = "u-flight-ok-0"
FAILING = "u-flight-date-0"


def _kappas(dom: str) -> dict[str, str]:
    """judge → the κ cell's text, from the overview's agreement table."""
    rows = re.findall(r'<tr class="judge" data-judge="([^"]+)">(.*?)</tr>', dom, re.S)
    out = {}
    for judge, row in rows:
        cell = re.search(r'<td class="num kappa">(.*?)</td>', row, re.S)
        assert cell is not None
        out[judge] = _text(cell.group(1)).split()[0]
    return out


def test_queue_label_and_the_overview_kappa_changes(tmp_path: Path) -> None:
    chromium = require_tool("chromium")
    refs = write_refs(tmp_path)
    config = review_config(tmp_path)
    config["review"] = {"rules": [{"when": "failing"}]}
    with serve(tmp_path, "--references", str(refs), config=config, env=judge_env(tmp_path)) as s:
        run_agent(s.http, "flight-ok:1,flight-date:1", "u-")
        wait_until(lambda: evaluated(s.http, [PASSING, FAILING]), 240, "both conversations")
        browser = _browser(chromium, tmp_path / "cdp")
        try:
            asyncio.run(_drive(tmp_path / "cdp", s.http))
        finally:
            browser.terminate()
            browser.wait(timeout=30)
        s.terminate()

    # Without a write token: no buttons, the queue read-only.
    config = review_config(tmp_path, write_token=None)
    config["review"] = {"rules": [{"when": "failing"}]}
    with serve(tmp_path, "--references", str(refs), config=config, env=judge_env(tmp_path)) as s:
        dom = _dump(chromium, f"{s.http}/ui/conversations/{PASSING}", tmp_path / "p1")
        assert "Conversation" in dom
        assert "queue for review" not in dom
        dom = _dump(chromium, f"{s.http}/ui/review?conversation_id={FAILING}", tmp_path / "p2")
        assert 'id="label-form"' not in dom
        assert "Write access is off" in dom
        # Turns numbered from 1 like the conversation page; each tool call with its arguments.
        assert "<h2>Turn 1</h2>" in dom
        assert "<h2>Turn 0</h2>" not in dom
        assert '<table class="tools">' in dom
        s.terminate()


async def _drive(profile: Path, base: str) -> None:
    ws_url = await _page_socket(profile)
    runner = None
    try:
        async with aiohttp.ClientSession() as session, session.ws_connect(ws_url) as ws:
            cdp = Cdp(ws)
            await cdp.call("Page.enable")
            await cdp.call("Network.enable")
            basic = base64.b64encode(f"me:{WRITE_TOKEN}".encode()).decode()
            await cdp.call(
                "Network.setExtraHTTPHeaders", headers={"Authorization": f"Basic {basic}"}
            )

            await cdp.open(f"{base}/ui/")
            assert await cdp.run("!!document.querySelector('#agreement')")
            assert await cdp.run("document.querySelectorAll('#agreement tr.judge').length") == 0

            # Queue the passing conversation from its page.
            await cdp.open(f"{base}/ui/conversations/{PASSING}")
            await cdp.click("#queue-review button")
            assert await cdp.run("location.search") == f"?conversation_id={PASSING}"
            assert PASSING in await cdp.run("document.querySelector('#review-item').innerText")
            await cdp.run("document.querySelector('input[name=turn_0][value=pass]').click()")
            await cdp.run("document.querySelector('input[name=passed][value=pass]').click()")
            await cdp.run("document.querySelector('textarea[name=comment]').value = 'fine'")
            await cdp.click("#save-label")
            assert f"labelled {PASSING}" in await cdp.run(
                "document.querySelector('#notice').innerText"
            )

            await cdp.open(f"{base}/ui/")
            kappas = _kappas(await cdp.run("document.documentElement.outerHTML"))
            assert kappas == {"llm": "—", "outcome": "—"}  # one label: undefined

            # The rule queued the failing one: the queue page shows it next.
            await cdp.open(f"{base}/ui/review")
            shown = await cdp.run("document.querySelector('#review-item').innerText")
            assert FAILING in shown
            assert "failing" in shown  # queued by the rule

            # A hostile origin posting a label through this browser: refused.
            runner, evil = await _hostile_site(f"{base}/ui/review/{quote(FAILING)}/label")
            await cdp.open(evil)
            body = ""
            for _ in range(600):
                body = str(await cdp.run("document.body ? document.body.innerText : ''"))
                if "refused" in body:
                    break
                await asyncio.sleep(0.1)
            assert "cross-origin write refused" in body, body
            status, _ = http_get(f"{base}/api/v1/review/labels")
            assert status == 200

            await cdp.open(f"{base}/ui/review")
            await cdp.run("document.querySelector('input[name=turn_0][value=fail]').click()")
            await cdp.run("document.querySelector('input[name=passed][value=fail]').click()")
            await cdp.click("#save-label")
            assert await cdp.run("!!document.querySelector('#empty')")

            await cdp.open(f"{base}/ui/")
            kappas = _kappas(await cdp.run("document.documentElement.outerHTML"))
            assert kappas == {"llm": "0.00", "outcome": "1.00"}
            assert "low" in await cdp.run(
                "document.querySelector('#agreement tr.judge[data-judge=llm]').innerText"
            )
    finally:
        if runner is not None:
            await runner.cleanup()
