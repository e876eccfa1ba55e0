"""UI pages for failure modes and reference candidates (docs/ui.md), server-rendered
like the other pages: no JavaScript, forms for the actions, jinja2 autoescaping for
everything agents and users wrote.

    GET  /ui/failure-modes                          top modes per version, new ones marked
    GET  /ui/reference-candidates                   the proposals
    GET  /ui/reference-candidates/{id}              one proposal's YAML (editable)
    POST /ui/reference-candidates/{id}/approve      write it (form field `yaml`)
    POST /ui/reference-candidates/{id}/reject
    POST /ui/conversations/{id}/reference           "make this a reference"

The POST routes are write routes (`WriteAccess`: write token, same origin, the
session's CSRF token in the form); without a write token they are off and the pages
show no buttons. Each answers with a redirect (303) to the page showing the outcome.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote, urlencode

from aiohttp import web

from tracepass.collector.api.candidates import ReferenceCandidates, edited_yaml
from tracepass.collector.api.failure_modes import failure_modes, failure_versions
from tracepass.collector.api.mode_summaries import ModeSummaries
from tracepass.collector.api.params import ParamError
from tracepass.collector.api.reference_writer import ApprovalError
from tracepass.collector.api.ui.pages import FAILING, UI_PREFIX, _env
from tracepass.collector.api.ui.write_pages import WritePages
from tracepass.collector.api.write_access import WriteAccess, WriteRoute
from tracepass.collector.receiver import GetRoute
from tracepass.collector.state import ResultsStore

__all__ = ["MAX_VERSIONS", "TriagePages"]

MAX_VERSIONS = 4  # versions shown on the failure-modes page (newest first)


class TriagePages(WritePages):
    def __init__(
        self,
        store: ResultsStore | None,
        candidates: ReferenceCandidates,
        write: WriteAccess,
        clock: Callable[[], float] = time.time,
        summaries: ModeSummaries | None = None,
    ) -> None:
        self.store = store
        self.summaries = summaries  # `failure_modes.summarize`: each mode's summary
        self.candidates = candidates
        self.write = write
        self.clock = clock
        self.env = _env()

    # ------------------------------------------------------------------ failure modes

    async def failure_modes(self, request: web.Request) -> web.StreamResponse:
        params = dict(request.query)
        agent = params.get("agent_name") or None
        version = params.get("agent_version") or None
        try:
            # Off the event loop: with a shared results store these are database reads.
            sections = await asyncio.to_thread(self._mode_sections, params, agent, version)
        except ParamError as exc:
            return self._error(request, str(exc), 400)
        except LookupError as exc:
            return self._error(request, str(exc), 503)
        return self._page(
            request,
            "failure_modes.html.j2",
            title="failure modes",
            sections=sections,
            params={
                k: params.get(k, "") for k in ("agent_name", "agent_version", "since", "limit")
            },
            failing=FAILING,
        )

    def _mode_sections(
        self, params: dict[str, str], agent: str | None, version: str | None
    ) -> list[dict[str, Any]]:
        """Each shown version's failure-modes answer, with the page's links."""
        pairs = failure_versions(self.store)
        if agent is not None:
            pairs = [p for p in pairs if p[0] == agent]
        if version is not None:
            pairs = [p for p in pairs if p[1] == version]
        sections = []
        for name, ver in pairs[:MAX_VERSIONS]:
            query = {**params, "agent_name": name, "agent_version": ver}
            body = failure_modes(self.store, query, self.clock, self.summaries)
            for mode in body["failure_modes"]:
                mode["url"] = f"{UI_PREFIX}/conversations?" + urlencode(
                    {
                        "agent_name": name,
                        "agent_version": ver,
                        "failure_mode": mode["signature"],
                        "outcome": "any",
                    }
                )
                mode["example_urls"] = [
                    (e, f"{UI_PREFIX}/conversations/{quote(e, safe='')}") for e in mode["examples"]
                ]
                peak = max(mode["trend"]) if mode["trend"] else 0
                mode["bars"] = [round(100 * n / peak) if peak else 0 for n in mode["trend"]]
            sections.append(body)
        return sections

    # ------------------------------------------------------------------ candidates

    async def candidate_list(self, request: web.Request) -> web.StreamResponse:
        try:
            await self.candidates.refresh()
        except LookupError as exc:
            return self._error(request, str(exc), 503)
        body = self.candidates.listing()
        for c in body["candidates"]:
            c["url"] = f"{UI_PREFIX}/reference-candidates/{quote(c['id'], safe='')}"
        return self._page(
            request,
            "candidates.html.j2",
            title="reference candidates",
            body=body,
            notice=request.query.get("notice", ""),
        )

    async def candidate(
        self,
        request: web.Request,
        *,
        status: int = 200,
        error: str = "",
        edited: str | None = None,
    ) -> web.StreamResponse:
        cid = request.match_info["candidate_id"]
        try:
            await self.candidates.refresh()
        except LookupError as exc:
            return self._error(request, str(exc), 503)
        c = self.candidates.one(cid)
        if c is None:
            return self._error(request, f"no reference candidate {cid!r}", 404)
        base = f"{UI_PREFIX}/reference-candidates/{quote(cid, safe='')}"
        return self._page(
            request,
            "candidate.html.j2",
            status=status,
            title=f"reference candidate {cid}",
            c=c,
            text=edited if edited is not None else c["yaml"],
            error=error,
            notice=request.query.get("notice", ""),
            approve_url=base + "/approve",
            reject_url=base + "/reject",
            conversation_urls=[
                (i, f"{UI_PREFIX}/conversations/{quote(i, safe='')}") for i in c["conversation_ids"]
            ],
        )

    async def candidate_page(self, request: web.Request) -> web.StreamResponse:
        return await self.candidate(request)

    async def approve(self, request: web.Request) -> web.StreamResponse:
        cid = request.match_info["candidate_id"]
        try:
            text = await edited_yaml(request)
        except ValueError as exc:
            return await self.candidate(request, status=400, error=str(exc))
        status, body = await asyncio.to_thread(self.candidates.approve, cid, text)
        if status >= 400:
            return await self.candidate(request, status=status, error=body["error"], edited=text)
        notice = f"approved: written to {body['path']}"
        if not body["created"]:
            notice = f"already approved: {body['path']}"
        url = f"{UI_PREFIX}/reference-candidates/{quote(cid, safe='')}?" + urlencode(
            {"notice": notice}
        )
        raise web.HTTPSeeOther(url)

    async def reject(self, request: web.Request) -> web.StreamResponse:
        cid = request.match_info["candidate_id"]
        status, body = await asyncio.to_thread(self.candidates.reject, cid)
        if status >= 400:
            return self._error(request, body["error"], status)
        raise web.HTTPSeeOther(
            f"{UI_PREFIX}/reference-candidates?" + urlencode({"notice": f"rejected {cid}"})
        )

    async def from_conversation(self, request: web.Request) -> web.StreamResponse:
        conversation_id = request.match_info["conversation_id"]
        try:
            body = await asyncio.to_thread(self.candidates.from_conversation, conversation_id)
        except ApprovalError as exc:
            return self._error(request, str(exc), exc.status)
        if body is None:
            return self._error(request, f"conversation {conversation_id!r} not found", 404)
        raise web.HTTPSeeOther(f"{UI_PREFIX}/reference-candidates/{quote(body['id'], safe='')}")

    # ------------------------------------------------------------------ routes

    def read_routes(self) -> list[GetRoute]:
        return [
            (f"{UI_PREFIX}/failure-modes", self.failure_modes),
            (f"{UI_PREFIX}/reference-candidates", self.candidate_list),
            (f"{UI_PREFIX}/reference-candidates/{{candidate_id}}", self.candidate_page),
        ]

    def write_routes(self) -> list[WriteRoute]:
        item = f"{UI_PREFIX}/reference-candidates/{{candidate_id}}"
        return [
            ("POST", item + "/approve", self.approve),
            ("POST", item + "/reject", self.reject),
            (
                "POST",
                f"{UI_PREFIX}/conversations/{{conversation_id}}/reference",
                self.from_conversation,
            ),
        ]
