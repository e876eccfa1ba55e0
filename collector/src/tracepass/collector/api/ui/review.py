"""The review queue's UI (docs/ui.md), server-rendered like the other pages: no
JavaScript, plain forms, jinja2 autoescaping for everything agents and users wrote.

    GET  /ui/review                              the next queued conversation (or
                                                 ?conversation_id=…): its turns, the
                                                 automatic verdicts and the label form
    POST /ui/review/{id}/label                   store the label (form), then the next one
    POST /ui/conversations/{id}/review           "queue for review" on a conversation page

The POST routes are write routes (`WriteAccess`); without a write token the page shows
the queue read-only and no forms. The overview's agreement table comes from
`agreement_rows` (the API's `/api/v1/review/agreement`).
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

from aiohttp import web

from tracepass.collector.api.ui.pages import UI_PREFIX, _env
from tracepass.collector.api.ui.security import conversation_path, secured
from tracepass.collector.api.ui.write_pages import WritePages
from tracepass.collector.api.write_access import WriteAccess, WriteRoute
from tracepass.collector.receiver import GetRoute
from tracepass.evaluator.models import ToolCall
from tracepass.evaluator.offline.human_review import is_judge

if TYPE_CHECKING:  # the queue builds these pages (`ReviewQueue.routes`)
    from tracepass.collector.api.review import ReviewQueue

__all__ = ["REVIEW_PAGE", "ReviewPages"]

REVIEW_PAGE = f"{UI_PREFIX}/review"
TURN_FIELD = "turn_"  # form field of turn i: turn_<i>


class ReviewPages(WritePages):
    def __init__(
        self, queue: ReviewQueue, write: WriteAccess, hosts: frozenset[str] | None = None
    ) -> None:
        self.queue = queue
        self.write = write
        # `ui.allowed_hosts` as resolved by `security.allowed_hosts` (the Host check).
        self.hosts = hosts
        self.env = _env()

    @property
    def can_write(self) -> bool:
        return self.write.enabled

    def agreement_rows(self) -> dict[str, Any] | None:
        """The overview's "people vs judges" table (None: no state file)."""
        try:
            return self.queue.agreement_json()
        except LookupError:
            return None

    async def page(
        self, request: web.Request, *, status: int = 200, error: str = ""
    ) -> web.StreamResponse:
        try:
            # Off the event loop: with a shared results store these are database reads.
            listing, wanted, stored, label, queued = await asyncio.to_thread(
                self._load, request.query.get("conversation_id") or None
            )
        except LookupError as exc:
            return self._error(request, str(exc), 503)
        context: dict[str, Any] = {
            "listing": listing,
            "notice": request.query.get("notice", ""),
            "error": error,
            "item": None,
        }
        if wanted is not None:
            if stored is None or stored.result is None:
                return self._error(request, f"no evaluated conversation {wanted!r}", 404)
            result = stored.result
            context["item"] = {
                "conversation_id": wanted,
                "url": conversation_path(UI_PREFIX, wanted),
                "action": f"{REVIEW_PAGE}/{quote(wanted, safe='')}/label",
                "reason": queued.reason if queued is not None else None,
                "agent": f"{result.agent_name or ''} {result.agent_version or ''}".strip(),
                "reference": result.reference_id,
                "outcome": result.outcome.value,
                "label": label,
                "turns": [
                    {
                        "index": t.index + 1,  # numbered from 1 like the conversation page
                        "field": f"{TURN_FIELD}{t.index}",
                        "query": t.query,
                        "answer": t.answer,
                        "expected": t.expected_answer,
                        "correct": t.correct,
                        "tools": [_tool_row(c) for c in t.tool_calls],
                        "graders": [
                            {
                                "name": g.grader,
                                "judge": is_judge({"grader": g.grader}),
                                "passed": g.passed,
                                "score": g.score,
                                "reasoning": g.reasoning or g.error or "",
                            }
                            for g in t.graders
                        ],
                        "human": None if label is None else label.turns.get(t.index),
                    }
                    for t in result.turns
                ],
            }
        return self._page(request, "review.html.j2", status=status, title="review", **context)

    def _load(self, wanted: str | None) -> tuple[dict[str, Any], str | None, Any, Any, Any]:
        """The queue's first page, the conversation shown (`wanted`, else the first
        waiting one), its stored result, label and queue entry."""
        listing = self.queue.queue_json({"limit": "50"})
        if wanted is None and listing["items"]:
            wanted = listing["items"][0]["conversation_id"]
        if wanted is None:
            return listing, None, None, None, None
        labels = self.queue.labels
        return (
            listing,
            wanted,
            self.queue.stored(wanted),
            labels.label(wanted) if labels is not None else None,
            labels.queued(wanted) if labels is not None else None,
        )

    async def get(self, request: web.Request) -> web.StreamResponse:
        return await self.page(request)

    async def label(self, request: web.Request) -> web.StreamResponse:
        conversation_id = request.match_info["conversation_id"]
        form = await request.post()
        turns = {
            key[len(TURN_FIELD) :]: value
            for key, value in form.items()
            if key.startswith(TURN_FIELD) and isinstance(value, str)
        }
        try:
            status, body = await self.queue.put_label(
                conversation_id,
                form.get("passed"),
                turns,
                str(form.get("comment") or ""),
                str(form.get("reviewer") or "") or None,
            )
        except LookupError as exc:  # no state file, or the shared database unreachable
            return self._error(request, str(exc), 503)
        if status >= 400:
            return self._error(request, body["error"], status)
        notice = f"labelled {conversation_id}"
        raise web.HTTPSeeOther(f"{REVIEW_PAGE}?" + urlencode({"notice": notice}))

    async def enqueue(self, request: web.Request) -> web.StreamResponse:
        conversation_id = request.match_info["conversation_id"]
        try:
            status, body = await self.queue.enqueue(conversation_id)
        except LookupError as exc:  # no state file, or the shared database unreachable
            return self._error(request, str(exc), 503)
        if status >= 400:
            return self._error(request, body["error"], status)
        raise web.HTTPSeeOther(f"{REVIEW_PAGE}?" + urlencode({"conversation_id": conversation_id}))

    def read_routes(self) -> list[GetRoute]:
        return [(REVIEW_PAGE, secured(self.get, self.hosts))]

    def write_routes(self) -> list[WriteRoute]:
        return [
            ("POST", f"{REVIEW_PAGE}/{{conversation_id}}/label", secured(self.label, self.hosts)),
            (
                "POST",
                f"{UI_PREFIX}/conversations/{{conversation_id}}/review",
                secured(self.enqueue, self.hosts),
            ),
        ]


# A reviewer reads arguments and results to judge a turn; a huge result is cut, not paged.
_SHOWN_CHARS = 2000


def _shown(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + f"… ({len(text):,} chars)"


def _tool_row(call: ToolCall) -> dict[str, str | None]:
    """One tool call as the review page shows it: name, arguments, result or error."""
    return {
        "name": call.name,
        "arguments": _shown(call.arguments),
        "result": None if call.result is None else _shown(call.result),
        "error": call.error,
    }
