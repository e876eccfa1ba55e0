"""Who may change state through the API and the UI, and from where.

Everything that changes state (approving a reference candidate, rejecting one, queueing
or labelling a conversation) goes through `WriteAccess.guard`. Three checks, in order:

1. Write access is on only when `api.write_token` is configured: otherwise every write
   route answers 404 (the UI hides its buttons), so a read-only deployment stays one.
2. The request carries the write token: `Authorization: Bearer <write_token>`, or HTTP
   Basic with it as the password (what a browser sends). The read token
   (`receiver.bearer_token`) is not enough: 401, with a challenge of its own realm.
3. Cross-site request forgery: a browser attaches Basic credentials and cookies to any
   request, also one a hostile page makes it send. So (a) an `Origin` (or, without it, a
   `Referer`) naming another host than the request's `Host` is refused (403), and (b) a
   request authenticated the browser's way (Basic) must carry the per-session token:
   `csrf_token` form field or `X-CSRF-Token` header, equal to the HMAC of the session
   cookie the UI set (403 otherwise). A bearer header cannot be attached cross-site
   without a CORS preflight (which this server never grants), so bearer clients (curl,
   scripts) need no CSRF token.

The session cookie is random per browser (`SameSite=Strict; HttpOnly`); the token is
derived from it with a per-process secret, so it cannot be computed by another site and
is never stored.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web

__all__ = [
    "CSRF_FIELD",
    "CSRF_HEADER",
    "SESSION_COOKIE",
    "WRITE_REALM",
    "WriteAccess",
    "WriteRefusal",
    "WriteRoute",
    "mount_write_routes",
]

CSRF_FIELD = "csrf_token"
CSRF_HEADER = "X-CSRF-Token"
SESSION_COOKIE = "tracepass_session"
WRITE_REALM = "tracepass-write"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
# (HTTP method, path pattern, handler) of a route that changes state.
WriteRoute = tuple[str, str, Handler]


@dataclass(frozen=True, slots=True)
class WriteRefusal:
    """Why a write request is refused: the HTTP status and a message for people."""

    status: int
    message: str


def _presented_token(header: str | None) -> tuple[str | None, bool]:
    """(token, sent the browser's way) from an Authorization header: the bearer token,
    or the password of HTTP Basic credentials."""
    if header is None:
        return None, False
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() == "bearer":
        return value.strip(), False
    if scheme.lower() == "basic":
        try:
            decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            return None, True
        return decoded.partition(":")[2], True
    return None, False


def _host_of(url: str) -> str | None:
    """`host[:port]` of an Origin/Referer value, lower case (None: not a URL)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if not parts.scheme or not parts.netloc:
        return None
    return parts.netloc.rpartition("@")[2].lower()


class WriteAccess:
    """The write-scope checks for one collector (see the module docstring)."""

    def __init__(self, write_token: str | None, *, secret: bytes | None = None) -> None:
        self._token = None if write_token is None else write_token.encode("utf-8")
        self._secret = secret if secret is not None else secrets.token_bytes(32)

    @property
    def enabled(self) -> bool:
        return self._token is not None

    # ------------------------------------------------------------------ sessions

    def csrf_for_session(self, session: str) -> str:
        return hmac.new(self._secret, session.encode("utf-8"), hashlib.sha256).hexdigest()

    def session_of(self, request: web.Request) -> str | None:
        value = request.cookies.get(SESSION_COOKIE)
        return value if value and len(value) <= 128 else None

    def page_session(self, request: web.Request) -> tuple[str, str | None]:
        """(the CSRF token a UI page embeds in its forms, the new session to set with
        `set_session` on the page's response, or None when the browser has one)."""
        session = self.session_of(request)
        if session is not None:
            return self.csrf_for_session(session), None
        session = secrets.token_urlsafe(24)
        return self.csrf_for_session(session), session

    @staticmethod
    def set_session(response: web.StreamResponse, session: str | None) -> None:
        if session is not None:
            response.set_cookie(SESSION_COOKIE, session, httponly=True, samesite="Strict", path="/")

    def ensure_session(self, request: web.Request, response: web.StreamResponse) -> str:
        """`page_session` + `set_session` for a response built before its body."""
        token, session = self.page_session(request)
        self.set_session(response, session)
        return token

    # ------------------------------------------------------------------ checks

    def refusal(
        self, request: web.Request, form: Mapping[str, Any] | None = None
    ) -> WriteRefusal | None:
        """None when `request` may change state, else why not. `form`: the request's
        already-read form fields (the CSRF token may be one of them)."""
        if self._token is None:
            return WriteRefusal(404, "write access is off: set api.write_token to enable it")
        refusal = self._cross_origin(request)
        if refusal is not None:
            return refusal
        token, browser = _presented_token(request.headers.get("Authorization"))
        if token is None:
            return WriteRefusal(401, "missing write token (Authorization: Bearer <write_token>)")
        if not hmac.compare_digest(token.encode("utf-8"), self._token):
            return WriteRefusal(401, "invalid write token (api.write_token)")
        if browser or self.session_of(request) is not None:
            return self._csrf(request, form)
        return None

    def _cross_origin(self, request: web.Request) -> WriteRefusal | None:
        host = (request.headers.get("Host") or request.host or "").lower()
        origin = request.headers.get("Origin")
        source = origin if origin is not None else request.headers.get("Referer")
        if source is None:
            return None
        if origin is not None and origin.strip().lower() == "null":
            return WriteRefusal(403, "cross-origin write refused (Origin: null)")
        if _host_of(source) != host:
            return WriteRefusal(403, f"cross-origin write refused ({source!r} is not {host!r})")
        return None

    def _csrf(self, request: web.Request, form: Mapping[str, Any] | None) -> WriteRefusal | None:
        session = self.session_of(request)
        sent = request.headers.get(CSRF_HEADER)
        if sent is None and form is not None:
            value = form.get(CSRF_FIELD)
            sent = value if isinstance(value, str) else None
        if session is None or sent is None:
            return WriteRefusal(403, "missing CSRF token: reload the page and try again")
        if not hmac.compare_digest(sent.encode("utf-8"), self.csrf_for_session(session).encode()):
            return WriteRefusal(403, "invalid CSRF token: reload the page and try again")
        return None

    def guard(self, handler: Handler) -> Handler:
        """`handler` behind the checks. Form posts are read first (their CSRF field)."""

        async def guarded(request: web.Request) -> web.StreamResponse:
            form: Mapping[str, Any] | None = None
            if request.content_type in ("application/x-www-form-urlencoded", "multipart/form-data"):
                form = await request.post()
            refusal = self.refusal(request, form)
            if refusal is not None:
                return refusal_response(refusal)
            return await handler(request)

        return guarded


def refusal_response(refusal: WriteRefusal) -> web.Response:
    response = web.Response(
        status=refusal.status,
        body=json.dumps({"error": refusal.message}, ensure_ascii=False).encode(),
        content_type="application/json",
    )
    if refusal.status == 401:
        response.headers.add("WWW-Authenticate", f'Basic realm="{WRITE_REALM}", charset="UTF-8"')
        response.headers.add("WWW-Authenticate", f'Bearer realm="{WRITE_REALM}"')
    return response


def mount_write_routes(
    app: web.Application, access: WriteAccess, routes: Sequence[WriteRoute]
) -> None:
    """Add `routes` to `app` behind `access` (before the app starts). Mounted even when
    write access is off, so they answer a clear 404 instead of a bare one."""
    for method, path, handler in routes:
        app.router.add_route(method, path, access.guard(handler))
