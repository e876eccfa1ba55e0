"""One way to render a UI page that may carry write forms: the template gets whether
writes are on and the session's CSRF token, and the response sets that session's
cookie. Shared by the triage pages (candidates, failure modes) and the review queue, so
the CSRF handshake is spelled once."""

from __future__ import annotations

from typing import Any

import jinja2
from aiohttp import web

from tracepass.collector.api.ui.pages import UI_PREFIX
from tracepass.collector.api.write_access import CSRF_FIELD, WriteAccess

__all__ = ["WritePages", "render_write_page"]


def render_write_page(
    env: jinja2.Environment,
    write: WriteAccess,
    request: web.Request,
    name: str,
    status: int = 200,
    **context: Any,
) -> web.Response:
    """Template `name` rendered with `context`, the write flag and (writes on) the
    request's CSRF token; the session cookie set on the response."""
    session = None
    csrf = ""
    if write.enabled:
        csrf, session = write.page_session(request)
    html = env.get_template(name).render(
        prefix=UI_PREFIX,
        can_write=write.enabled,
        csrf_field=CSRF_FIELD,
        csrf=csrf,
        **context,
    )
    response = web.Response(status=status, text=html, content_type="text/html", charset="utf-8")
    WriteAccess.set_session(response, session)
    return response


class WritePages:
    """Base of the page sets with write forms (triage, review): their pages and error
    pages rendered through `render_write_page` with the set's own template environment
    and write access, which the subclass sets."""

    env: jinja2.Environment
    write: WriteAccess

    def _page(
        self, request: web.Request, name: str, status: int = 200, **context: Any
    ) -> web.Response:
        return render_write_page(self.env, self.write, request, name, status, **context)

    def _error(self, request: web.Request, message: str, status: int) -> web.Response:
        return self._page(request, "error.html.j2", status=status, title="error", message=message)
