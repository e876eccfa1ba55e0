"""What protects the web UI beyond the bearer token (docs/ui.md, "Security").

* Every page carries `Content-Security-Policy` (no script at all, styles inline, images
  only from the page or `data:`, forms only to the collector, no framing),
  `X-Content-Type-Options: nosniff` and `Referrer-Policy: same-origin`.
* The `Host` header must name the collector (`ui.allowed_hosts`; by default the loopback
  names and the bind address, plus the machine's own names when bound to every
  interface): a DNS-rebinding page that points its own name at the collector is
  answered 421 Misdirected Request, never a page of data.
* Conversation ids that a browser would rewrite (`.`, `..`, anything with `/`) are
  linked through `/ui/conversation?id=…`, so every id opens.
* Text from agents is shown with its invisible characters made visible: bidi controls
  (right-to-left override, …) and zero-width characters are replaced by `[U+XXXX]`, so
  a query cannot show one thing and mean another.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Awaitable, Callable, Iterable
from typing import Any
from urllib.parse import quote

from aiohttp import web
from markupsafe import Markup

__all__ = [
    "SECURITY_HEADERS",
    "allowed_hosts",
    "conversation_path",
    "host_allowed",
    "reveal_invisible",
    "secured",
]

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
}
_LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1", "localhost.localdomain")
_WILDCARDS = {"0.0.0.0", "::", ""}

# Bidi embeddings/overrides/isolates and marks, and zero-width characters.
_INVISIBLE = {
    *range(0x202A, 0x202F),  # LRE, RLE, PDF, LRO, RLO
    *range(0x2066, 0x206A),  # LRI, RLI, FSI, PDI
    0x200E,  # LRM
    0x200F,  # RLM
    0x061C,  # ARABIC LETTER MARK
    0x200B,  # ZERO WIDTH SPACE
    0x200C,  # ZWNJ
    0x200D,  # ZWJ
    0x2060,  # WORD JOINER
    0xFEFF,  # ZERO WIDTH NO-BREAK SPACE (BOM)
    0x180E,  # MONGOLIAN VOWEL SEPARATOR
}
_REVEAL = {cp: f"[U+{cp:04X}]" for cp in _INVISIBLE}


def reveal_invisible(value: Any) -> Any:
    """Jinja `finalize`: strings (not markup the templates built) with their bidi and
    zero-width characters replaced by a visible `[U+XXXX]`."""
    if isinstance(value, str) and not isinstance(value, Markup):
        return value.translate(_REVEAL)
    return value


def _host_of(header: str) -> str:
    """The host part of a `Host` header (no port; IPv6 without brackets), lowercased."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else header
    if header.count(":") == 1:
        return header.rsplit(":", 1)[0]
    return header


def _machine_names() -> set[str]:
    names: set[str] = set()
    try:
        for name in {socket.gethostname(), socket.getfqdn()}:
            if name:
                names.add(name.lower())
                for info in socket.getaddrinfo(name, None):
                    names.add(str(info[4][0]).lower())
    except OSError:
        pass
    return names


def allowed_hosts(configured: Iterable[str] | None, bind_host: str) -> frozenset[str] | None:
    """The `Host` names the UI answers (None: any, configured as `"*"`)."""
    if configured is not None:
        names = {h.strip().lower() for h in configured}
        if "*" in names:
            return None
        return frozenset(_host_of(h) if h.count(":") <= 1 else h for h in names)
    names = set(_LOOPBACK_NAMES)
    if bind_host in _WILDCARDS:
        names |= _machine_names()
    else:
        names.add(bind_host.strip("[]").lower())
    return frozenset(names)


def host_allowed(header: str | None, allowed: frozenset[str] | None) -> bool:
    if allowed is None:
        return True
    if not header:
        return False
    host = _host_of(header)
    if host in allowed:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback  # 127.0.0.2, ::1: this machine
    except ValueError:
        return False


def conversation_path(prefix: str, conversation_id: str) -> str:
    """The UI link of a conversation: its path, or `?id=` for ids a browser would
    rewrite as dot segments or split at `/` (`.`, `..`, `a/b`)."""
    if conversation_id in {".", ".."} or "/" in conversation_id or "\\" in conversation_id:
        return f"{prefix}/conversation?id={quote(conversation_id, safe='')}"
    return f"{prefix}/conversations/{quote(conversation_id, safe='')}"


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def secured(handler: Handler, allowed: frozenset[str] | None) -> Handler:
    """`handler` behind the Host check, its responses (redirects and errors too) with
    the security headers."""

    async def guarded(request: web.Request) -> web.StreamResponse:
        if not host_allowed(request.headers.get("Host"), allowed):
            response: web.StreamResponse = web.Response(
                status=421,
                text="misdirected request: this Host is not one of ui.allowed_hosts\n",
                content_type="text/plain",
            )
        else:
            try:
                response = await handler(request)
            except web.HTTPException as exc:
                exc.headers.update(SECURITY_HEADERS)
                raise
        response.headers.update(SECURITY_HEADERS)
        return response

    return guarded
