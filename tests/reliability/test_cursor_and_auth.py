"""Issue 21 #11 and #12, against a real `tracepass serve`: a cursor holding a
400-digit integer, deep nesting or an overlong string is a 400 on the API and the UI
(it was a 500); an `Authorization` header with bytes outside UTF-8 is a 401 (it was a
500, counted as an error, with a traceback logged per request)."""

from __future__ import annotations

import base64
import http.client
import json
from collections.abc import Iterator

import pytest
from _serve import Serve, write_config

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

TOKEN = "s3cret"


def _cursor(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


HOSTILE_CURSORS = {
    "400-digit integer": _cursor(b"[" + b"9" * 400 + b', "k"]'),
    "deep nesting": _cursor(b"[" * 2500 + b"]" * 2500),
    "infinite time": _cursor(b'[1e999, "k"]'),
    "boolean time": _cursor(b'[true, "k"]'),
    "overlong": "A" * 6000,
}


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    tmp = tmp_path_factory.mktemp("cursor")
    s = Serve(write_config(tmp, tmp / "state.db", receiver={"bearer_token": TOKEN}))
    yield s
    s.stop()


def _get(serve: Serve, path: str, authorization: bytes) -> tuple[int, bytes]:
    """GET `path` (POST an empty protobuf export to `/v1/traces`) with raw header bytes."""
    conn = http.client.HTTPConnection("127.0.0.1", serve.port, timeout=60)
    try:
        export = path == "/v1/traces"
        conn.putrequest("POST" if export else "GET", path)
        conn.putheader("Authorization", authorization)
        if export:
            conn.putheader("Content-Type", "application/x-protobuf")
            conn.putheader("Content-Length", "0")
        conn.endheaders()
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


@pytest.mark.parametrize("name", sorted(HOSTILE_CURSORS))
def test_hostile_cursor_is_400(serve: Serve, name: str) -> None:
    auth = f"Bearer {TOKEN}".encode()
    status, body = _get(serve, f"/api/v1/conversations?cursor={HOSTILE_CURSORS[name]}", auth)
    assert status == 400, body[:300]
    assert "cursor" in json.loads(body)["error"]
    status, body = _get(serve, f"/ui/conversations?cursor={HOSTILE_CURSORS[name]}", auth)
    assert status == 400, body[:300]


@pytest.mark.parametrize("path", ["/api/v1/conversations", "/ui/", "/v1/traces"])
@pytest.mark.parametrize("header", [b"Bearer \xff", b"Bearer \xc3", b"Basic \xff\xfe"])
def test_non_ascii_authorization_is_401(serve: Serve, path: str, header: bytes) -> None:
    status, _ = _get(serve, path, header)
    assert status == 401


def test_no_traceback_logged(serve: Serve) -> None:
    for _ in range(20):
        assert _get(serve, "/api/v1/conversations", b"Bearer \xff")[0] == 401
    assert _get(serve, "/api/v1/conversations", f"Bearer {TOKEN}".encode())[0] == 200
    serve.stop()
    assert serve.proc.stderr is not None
    log = serve.proc.stderr.read()
    assert "Traceback" not in log
    assert "UnicodeEncodeError" not in log
