"""Issue 21 #15, through a real `tracepass serve`: the UI's security headers, the
allowed-hosts check against DNS rebinding (a foreign `Host` is 421), conversation ids
`.` and `..` that open from the list's links, bidi and zero-width characters shown
visibly, and `/metrics` protected as soon as any token is set."""

from __future__ import annotations

import html
import http.client
import re
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urljoin

import pytest
from _serve import Serve, write_config
from test_normalize_basics import make_request, make_span

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

TOKEN = "ui-s3cret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
RLO = "\u202e"
ZWSP = "\u200b"
IDS = [".", "..", "a/b", f"invoice{RLO}fdp.exe", f"zero{ZWSP}width"]


def _conversation(cid: str, n: int) -> bytes:
    span = make_span(
        "invoke_agent travel",
        {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "travel",
            "gen_ai.conversation.id": cid,
            "gen_ai.input.messages": [{"role": "user", "content": f"pay {RLO}gpj.exe{ZWSP}"}],
            "gen_ai.output.messages": [{"role": "assistant", "content": "done"}],
        },
        trace_id=(n + 1).to_bytes(16, "big"),
    )
    return make_request(span).SerializeToString()  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    tmp = tmp_path_factory.mktemp("ui")
    s = Serve(write_config(tmp, tmp / "state.db", receiver={"bearer_token": TOKEN}))
    yield s
    s.stop()


def _get(serve: Serve, path: str, host: str | None = None) -> tuple[int, dict[str, str], str]:
    conn = http.client.HTTPConnection("127.0.0.1", serve.port, timeout=60)
    try:
        headers = dict(AUTH)
        if host is not None:
            headers["Host"] = host
        conn.request("GET", path, headers=headers)
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read().decode("utf-8", "replace")
    finally:
        conn.close()


def _post(serve: Serve, body: bytes) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", serve.port, timeout=60)
    try:
        headers = {**AUTH, "Content-Type": "application/x-protobuf"}
        conn.request("POST", "/v1/traces", body=body, headers=headers)
        resp = conn.getresponse()
        resp.read()
        return resp.status
    finally:
        conn.close()


@pytest.mark.parametrize("path", ["/ui/", "/ui/conversations", "/ui/conversations/nope", "/ui"])
def test_security_headers(serve: Serve, path: str) -> None:
    status, headers, body = _get(serve, path)
    assert status in (200, 302, 404), body[:300]
    csp = headers["Content-Security-Policy"]
    assert "script-src 'none'" in csp
    assert "default-src 'none'" in csp
    assert "frame-ancestors 'none'" in csp
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Referrer-Policy"] == "same-origin"
    assert "<script" not in body


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        ("evil.example", False),
        ("evil.example:{port}", False),
        ("127.0.0.1:{port}", True),
        ("localhost:{port}", True),
        ("[::1]:{port}", True),
    ],
)
def test_allowed_hosts(serve: Serve, host: str, allowed: bool) -> None:
    status, headers, _ = _get(serve, "/ui/", host=host.format(port=serve.port))
    assert status == (200 if allowed else 421)
    assert headers["X-Content-Type-Options"] == "nosniff"


def test_dot_ids_open_and_invisible_characters_show(serve: Serve) -> None:
    for n, cid in enumerate(IDS):
        assert _post(serve, _conversation(cid, n)) == 200
    deadline = time.monotonic() + 120
    while True:
        status, _, body = _get(serve, "/ui/conversations?outcome=any&limit=100")
        links = re.findall(r'<td><a href="([^"]+)">', body)
        if len(links) >= len(IDS):
            break
        assert time.monotonic() < deadline, body[-2000:]
        time.sleep(0.3)
    assert RLO not in body
    assert ZWSP not in body
    assert "[U+202E]" in body
    opened = set()
    for link in links:
        # What a browser requests: the link resolved against the page, dot segments removed.
        url = urljoin(f"http://127.0.0.1:{serve.port}/ui/conversations", html.unescape(link))
        path = url.split(str(serve.port), 1)[1]
        status, _, page = _get(serve, path)
        assert status == 200, (link, path, page[:500])
        assert "<h1>Conversation" in page
        assert RLO not in page
        assert ZWSP not in page
        opened.add(html.unescape(re.search(r"<h1>Conversation <code>(.*?)</code>", page)[1]))
    assert opened == {c.replace(RLO, "[U+202E]").replace(ZWSP, "[U+200B]") for c in IDS}


def _metrics_status(url: str, token: str | None = None) -> int:
    request = urllib.request.Request(url)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_metrics_protected_by_the_receiver_token(serve: Serve) -> None:
    assert _metrics_status(serve.metrics_url) == 401
    assert _metrics_status(serve.metrics_url, "wrong") == 401
    assert _metrics_status(serve.metrics_url, TOKEN) == 200


def test_metrics_open_only_when_said_so(tmp_path: Path) -> None:
    s = Serve(
        write_config(
            tmp_path, tmp_path / "state.db",
            receiver={"bearer_token": TOKEN}, metrics={"bearer_token": ""},
        )
    )  # fmt: skip
    try:
        assert _metrics_status(s.metrics_url) == 200
    finally:
        s.stop()
