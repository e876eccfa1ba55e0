"""The failure-modes page and the "make this a reference" button in real headless
Chromium, against a real `tracepass serve` fed over real OTLP by the scripted agent.

The page is rendered (`--dump-dom`): modes per version, the new one marked, each
linking to the failing list filtered to it. The button is clicked through the DevTools
protocol (a real click, a real form post with the browser's cookie, CSRF field and
Origin): it leads to the candidate's page, whose approve button writes the reference.
A hostile page on another origin that makes the same browser post to a write route is
refused, and without `api.write_token` the button is not rendered at all.
"""

from __future__ import annotations

import asyncio
import base64
import html
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import aiohttp
import pytest
from _live_support import FAST_CONFIG, clean_env, http_get, serve, wait_until
from aiohttp import web

from conftest import require_tool

pytestmark = [pytest.mark.slow, pytest.mark.system, pytest.mark.timeout(600)]

AGENT_SCRIPT = Path(__file__).with_name("_triage_agent.py")
WRITE_TOKEN = "click-token"
REFERENCE = """
name: triage-flights
references:
  - id: oslo-rome
    turns:
      - query: Find flights from Oslo to Rome on 2025-07-01
        graders: [{type: contains, keywords: [DY1870]}]
        expected_tools:
          - {name: search_flights, arguments: {origin: Oslo, destination: Rome, date: "2025-07-01"}}
          - {name: pick_seat, arguments: {flight: DY1870, side: aisle}}
"""


def _agent(endpoint: str, plan: str, *, version: str, prefix: str) -> None:
    cmd = [sys.executable, str(AGENT_SCRIPT), endpoint, "--plan", plan, "--version", version]
    done = subprocess.run(
        [*cmd, "--prefix", prefix], capture_output=True, text=True, env=clean_env(), timeout=300
    )
    assert done.returncode == 0, done.stderr


def _dump(chromium: str, url: str, profile: Path) -> str:
    done = subprocess.run(
        [
            chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            f"--user-data-dir={profile}", "--window-size=1300,1600", "--dump-dom", url,
        ],
        check=True, timeout=120, capture_output=True, text=True,
    )  # fmt: skip
    return done.stdout


def _text(dom: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", dom))


class Cdp:
    """The few DevTools-protocol calls the test needs, over the page's websocket."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.n = 0
        self.events: list[dict[str, Any]] = []

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.n += 1
        await self.ws.send_json({"id": self.n, "method": method, "params": params})
        while True:
            msg = await self.ws.receive_json(timeout=120)
            if msg.get("id") == self.n:
                assert "error" not in msg, msg
                return dict(msg["result"])
            self.events.append(msg)

    async def until_loaded(self) -> None:
        while True:
            if any(e.get("method") == "Page.loadEventFired" for e in self.events):
                self.events.clear()
                return
            self.events.append(await self.ws.receive_json(timeout=120))

    async def open(self, url: str) -> None:
        self.events.clear()
        await self.call("Page.navigate", url=url)
        await self.until_loaded()

    async def run(self, expression: str) -> Any:
        out = await self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return out["result"].get("value")

    async def click(self, selector: str) -> None:
        self.events.clear()
        await self.run(f"document.querySelector({json.dumps(selector)}).click()")
        await self.until_loaded()


def _browser(chromium: str, profile: Path) -> subprocess.Popen[bytes]:
    """Headless Chromium with the DevTools protocol on an ephemeral port."""
    return subprocess.Popen(
        [
            chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--remote-debugging-port=0", f"--user-data-dir={profile}", "about:blank",
        ],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


async def _page_socket(profile: Path) -> str:
    """The websocket URL of the browser's page (its port is in DevToolsActivePort)."""
    active = profile / "DevToolsActivePort"
    for _ in range(1200):
        if active.exists() and len(active.read_text().splitlines()) >= 2:
            break
        await asyncio.sleep(0.1)
    port = active.read_text().splitlines()[0]
    async with aiohttp.ClientSession() as session:
        for _ in range(600):
            async with session.get(f"http://127.0.0.1:{port}/json/list") as r:
                pages = [t for t in await r.json() if t.get("type") == "page"]
            if pages:
                return str(pages[0]["webSocketDebuggerUrl"])
            await asyncio.sleep(0.1)
    raise AssertionError("no Chromium page target")


async def _hostile_site(target: str) -> tuple[web.AppRunner, str]:
    """Another origin whose page makes the browser post to `target` at once."""
    page = (
        f'<form id="f" method="post" action="{html.escape(target)}">'
        '<input name="csrf_token" value="guess"></form>'
        "<script>document.getElementById('f').submit()</script>"
    )

    async def index(request: web.Request) -> web.Response:
        return web.Response(text=page, content_type="text/html")

    app = web.Application()
    app.router.add_get("/", index)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}/"


def test_failure_modes_page_and_one_click_reference(tmp_path: Path) -> None:
    chromium = require_tool("chromium")
    refs = tmp_path / "refs"
    refs.mkdir()
    (refs / "flights.yaml").write_text(REFERENCE, encoding="utf-8")
    config = {**FAST_CONFIG, "api": {"write_token": WRITE_TOKEN}}
    with serve(tmp_path, "--references", str(refs), config=config) as s:
        _agent(s.http, "flight-ok:3,flight-date:3,weather:1", version="1.0", prefix="a-")

        def failing(version: str, n: int) -> dict[str, Any] | None:
            status, body = http_get(
                f"{s.http}/api/v1/failure-modes?"
                + urlencode({"agent_name": "triage-agent", "agent_version": version})
            )
            data = json.loads(body) if status == 200 else {}
            return data if data.get("failing_conversations", 0) >= n else None

        wait_until(lambda: failing("1.0", 3), 180, "1.0's failing conversations")
        _agent(s.http, "flight-date:2,flight-side:4", version="1.1", prefix="b-")
        wait_until(lambda: failing("1.1", 6), 180, "1.1's failing conversations")

        dom = _dump(chromium, f"{s.http}/ui/failure-modes", tmp_path / "p1")
        sections = re.findall(r'<section class="version".*?</section>', dom, re.S)
        assert len(sections) == 2
        assert "triage-agent 1.1" in _text(sections[0])
        rows = re.findall(r'<tr class="mode( new)?">(.*?)</tr>', sections[0], re.S)
        shown = [(bool(new), re.search(r"<code>([^<]+)</code>", row).group(1)) for new, row in rows]  # type: ignore[union-attr]
        assert shown == [
            (True, "wrong_argument:pick_seat.side"),
            (False, "wrong_argument:search_flights.date"),
        ]
        link = html.unescape(
            re.search(r'<a class="signature" href="([^"]+)"', sections[0]).group(1)
        )  # type: ignore[union-attr]
        assert "failure_mode=wrong_argument%3Apick_seat.side" in link
        listed = _dump(chromium, s.http + link, tmp_path / "p2")
        ids = re.findall(
            r'class="conversation-row">\s*<td><a href="/ui/conversations/([^"]+)"', listed
        )
        assert sorted(ids) == [f"b-flight-side-{i}" for i in range(4)]

        browser = _browser(chromium, tmp_path / "cdp")
        try:
            asyncio.run(_click_through(tmp_path / "cdp", s.http, refs))
        finally:
            browser.terminate()
            browser.wait(timeout=30)
        s.terminate()

    # Without a write token: no button on the conversation page, write routes off.
    with serve(tmp_path, "--references", str(refs), config=FAST_CONFIG) as s:
        _agent(s.http, "weather:1", version="1.0", prefix="c-")
        wait_until(
            lambda: http_get(f"{s.http}/api/v1/conversations/c-weather-0")[0] == 200,
            180,
            "the conversation",
        )
        dom = _dump(chromium, f"{s.http}/ui/conversations/c-weather-0", tmp_path / "p3")
        assert "Conversation" in dom
        assert "make this a reference" not in dom
        request = f"{s.http}/api/v1/conversations/c-weather-0/reference"
        status = _post_status(request)
        assert status == 404
        s.terminate()


def _post_status(url: str) -> int:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=b"", method="POST")) as r:
            return int(r.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


async def _click_through(profile: Path, base: str, refs: Path) -> None:
    ws_url = await _page_socket(profile)
    runner = None
    try:
        async with (
            aiohttp.ClientSession() as session,
            session.ws_connect(ws_url, max_msg_size=0) as ws,
        ):
            cdp = Cdp(ws)
            await cdp.call("Page.enable")
            await cdp.call("Network.enable")
            # The credentials a person would type into the browser's Basic prompt.
            basic = base64.b64encode(f"me:{WRITE_TOKEN}".encode()).decode()
            await cdp.call(
                "Network.setExtraHTTPHeaders", headers={"Authorization": f"Basic {basic}"}
            )

            await cdp.open(f"{base}/ui/conversations/a-weather-0")
            assert await cdp.run("!!document.querySelector('#make-reference button')")
            await cdp.click("#make-reference button")
            path = await cdp.run("location.pathname")
            assert path.startswith("/ui/reference-candidates/conv-"), path
            text = await cdp.run("document.querySelector('textarea').value")
            assert "query: What's the weather in Bergen?" in text
            assert "name: get_weather" in text

            # The same YAML as the API's one-click endpoint.
            candidate_id = path.rsplit("/", 1)[1]
            async with session.get(
                f"{base}/api/v1/reference-candidates/{quote(candidate_id)}"
            ) as r:
                assert (await r.json())["yaml"] == text

            # A hostile origin making this browser post to a write route: refused.
            runner, evil = await _hostile_site(
                f"{base}/ui/reference-candidates/{quote(candidate_id)}/reject"
            )
            await cdp.open(evil)
            body = ""
            for _ in range(600):  # the auto-submitted form's answer replaces the page
                body = str(await cdp.run("document.body ? document.body.innerText : ''"))
                if "refused" in body:
                    break
                await asyncio.sleep(0.1)
            assert "cross-origin write refused" in body, body

            await cdp.open(f"{base}/ui/reference-candidates/{quote(candidate_id)}")
            await cdp.click("#approve button")
            notice = await cdp.run("document.querySelector('#notice').innerText")
            assert "approved: written to" in notice, notice
            written = refs / f"{candidate_id}.yaml"
            assert written.exists()
            assert "What's the weather in Bergen?" in written.read_text(encoding="utf-8")
    finally:
        if runner is not None:
            await runner.cleanup()
