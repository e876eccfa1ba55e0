"""Write access over a real aiohttp server on loopback: off without a write token (404),
the read token is not enough (401), cross-origin and CSRF-less browser requests are
refused (403), bearer clients and same-origin forms with the session's token pass."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web

from tracepass.collector.api.write_access import (
    CSRF_FIELD,
    CSRF_HEADER,
    SESSION_COOKIE,
    WriteAccess,
    mount_write_routes,
)

TOKEN = "w-s3cret-ü"
ACCESS = web.AppKey("access", WriteAccess)


async def _changed(request: web.Request) -> web.StreamResponse:
    return web.json_response({"changed": True})


async def _page(request: web.Request) -> web.StreamResponse:
    access: WriteAccess = request.app[ACCESS]
    response = web.Response(text="")
    response.text = access.ensure_session(request, response)
    return response


async def _server(access: WriteAccess) -> AsyncIterator[str]:
    app = web.Application()
    app[ACCESS] = access
    app.router.add_get("/page", _page)
    mount_write_routes(app, access, [("POST", "/change", _changed)])
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await runner.cleanup()


@pytest.fixture
async def on() -> AsyncIterator[str]:
    async for host in _server(WriteAccess(TOKEN)):
        yield host


@pytest.fixture
async def off() -> AsyncIterator[str]:
    async for host in _server(WriteAccess(None)):
        yield host


def _basic(token: str) -> str:
    return "Basic " + base64.b64encode(f"me:{token}".encode()).decode()


async def test_off_without_a_write_token(off: str) -> None:
    async with (
        aiohttp.ClientSession() as s,
        s.post(f"http://{off}/change", headers={"Authorization": "Bearer x"}) as r,
    ):
        assert r.status == 404
        assert "api.write_token" in (await r.json())["error"]


async def test_bearer_client_needs_the_write_token(on: str) -> None:
    async with aiohttp.ClientSession() as s:
        async with s.post(f"http://{on}/change") as r:
            assert r.status == 401
            assert any("tracepass-write" in h for h in r.headers.getall("WWW-Authenticate"))
        async with s.post(f"http://{on}/change", headers={"Authorization": "Bearer read"}) as r:
            assert r.status == 401
        async with s.post(f"http://{on}/change", headers={"Authorization": f"Bearer {TOKEN}"}) as r:
            assert r.status == 200
            assert await r.json() == {"changed": True}


async def test_cross_origin_is_refused_even_with_the_token(on: str) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    async with aiohttp.ClientSession() as s:
        for header in (
            {"Origin": "http://evil.example"},
            {"Origin": "null"},
            {"Referer": "http://evil.example/page"},
        ):
            async with s.post(f"http://{on}/change", headers={**auth, **header}) as r:
                assert r.status == 403, header
                assert "cross-origin" in (await r.json())["error"]
        async with s.post(f"http://{on}/change", headers={**auth, "Origin": f"http://{on}"}) as r:
            assert r.status == 200


async def test_browser_requests_need_the_session_csrf_token(on: str) -> None:
    # unsafe: keep cookies of a host given by IP address (the loopback server).
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as s:
        async with s.get(f"http://{on}/page") as r:
            csrf = await r.text()
            assert SESSION_COOKIE in r.cookies
        basic = {"Authorization": _basic(TOKEN), "Origin": f"http://{on}"}
        async with s.post(f"http://{on}/change", headers=basic, data={"x": "1"}) as r:
            assert r.status == 403
            assert "CSRF" in (await r.json())["error"]
        async with s.post(
            f"http://{on}/change", headers=basic, data={CSRF_FIELD: "0" * len(csrf)}
        ) as r:
            assert r.status == 403
        async with s.post(f"http://{on}/change", headers=basic, data={CSRF_FIELD: csrf}) as r:
            assert r.status == 200
        async with s.post(f"http://{on}/change", headers={**basic, CSRF_HEADER: csrf}) as r:
            assert r.status == 200
    # Another browser (another session) cannot reuse the token.
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as other:
        async with other.get(f"http://{on}/page") as r:
            assert await r.text() != csrf
        async with other.post(
            f"http://{on}/change", headers={"Authorization": _basic(TOKEN)}, data={CSRF_FIELD: csrf}
        ) as r:
            assert r.status == 403
