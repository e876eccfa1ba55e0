"""Reference candidates in the running collector: fed by evaluated conversations that
matched no reference, listed and approved through the API (docs/reference-candidates.md).

    GET  /api/v1/reference-candidates                 the current proposals
    GET  /api/v1/reference-candidates/{id}            one, with the YAML it would write
    POST /api/v1/reference-candidates/{id}/approve    write it (optionally edited YAML)
    POST /api/v1/reference-candidates/{id}/reject     hide it
    POST /api/v1/conversations/{id}/reference         a candidate from one conversation

The POST routes change state: they are mounted behind `WriteAccess` (write token,
same-origin, CSRF). Approving writes a new file into the reference directory
(`reference_writer.py`); the reference watcher loads it and from then on matching
conversations are scored against it, so the task is no longer mined.

Approvals run one at a time, off the event loop (validating 1 MB of YAML, or building
the candidate of a 3,000-call conversation, took seconds). Their clash check sees the
ids of files approved but not yet reloaded by the watcher: two approvals sharing a
reference id within the reload interval used to be both written (the second is a 409).
A candidate whose YAML exceeds the approval body limit (`MAX_YAML_BYTES`) is refused
with 413: it could never come back edited.

With a shared results store (PostgreSQL, several replicas behind the gateway) each
replica evaluates only its share, so a miner fed by its own evaluations would propose
from that share and two replicas would list different candidates. There the miner is
instead rebuilt from the database's unreferenced results (`refresh`: the newest
`SHARED_MINE_LIMIT`, in one total order, so every replica builds the same miner), at
most every `SHARED_REFRESH_S` when the candidates are asked for, off the event loop.
Approvals and rejections are recorded there too (`CandidateDecisions`), so a candidate
decided on one replica leaves every replica's list.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from aiohttp import web

from tracepass.collector.api.reference_writer import ApprovalError, write_reference
from tracepass.collector.api.write_access import WriteRoute
from tracepass.collector.receiver import GetRoute
from tracepass.collector.state import StoredResult
from tracepass.evaluator.models import Conversation, ConversationResult
from tracepass.evaluator.references.candidate_mining import (
    Candidate,
    CandidateMiner,
    single_candidate,
)
from tracepass.evaluator.references.candidate_yaml import candidate_yaml
from tracepass.evaluator.references.matching import ReferenceCatalog

__all__ = [
    "CANDIDATES_PATH",
    "CONVERSATION_REFERENCE_PATH",
    "SHARED_MINE_LIMIT",
    "SHARED_REFRESH_S",
    "ReferenceCandidates",
    "candidate_json",
    "candidate_read_routes",
    "candidate_write_routes",
]

log = logging.getLogger(__name__)

CANDIDATES_PATH = "/api/v1/reference-candidates"
CANDIDATE_PATH = CANDIDATES_PATH + "/{candidate_id}"
CONVERSATION_REFERENCE_PATH = "/api/v1/conversations/{conversation_id}/reference"
MAX_YAML_BYTES = 1 << 20
# Shared store: how stale a replica's candidates may be, and how many unreferenced
# results they are mined from (the newest; the state file's warm-up reads as many).
SHARED_REFRESH_S = 10.0
SHARED_MINE_LIMIT = 20000


def candidate_json(candidate: Candidate, state: str = "proposed") -> dict[str, Any]:
    return {
        "id": candidate.id,
        "query": candidate.query,
        "tools": candidate.tools,
        "agreement": candidate.agreement,
        "conversations": candidate.conversations,
        "voting_conversations": candidate.voters,
        "conversation_ids": list(candidate.conversation_ids),
        "agent_versions": candidate.agent_versions,
        "left_out": {
            t.name: list(t.left_out) for turn in candidate.turns for t in turn.tools if t.left_out
        },
        "state": state,
        "yaml": candidate_yaml(candidate),
    }


class CandidateDecisions(Protocol):
    """Approvals and rejections shared by the replicas (`state/pg_candidates.py`);
    blocking, LookupError when unreachable."""

    def decided(self) -> dict[str, str]:
        """candidate id → "approved" or "rejected"."""
        ...

    def decide(self, candidate_id: str, state: str) -> None: ...


class ReferenceCandidates:
    """The miner, the one-click candidates, and what was approved or rejected."""

    def __init__(
        self,
        miner: CandidateMiner,
        directory: Path | None,
        *,
        catalog: Callable[[], ReferenceCatalog] = ReferenceCatalog,
        lookup: Callable[[str], StoredResult | None] = lambda _: None,
        blocked: Callable[[], dict[str, str]] = dict,
        shared: Callable[[int], list[StoredResult]] | None = None,
        decisions: CandidateDecisions | None = None,
    ) -> None:
        self.miner = miner
        # The shared store's `unreferenced_results` (None: mine this replica's own), and
        # its record of what people decided (read with each refresh).
        self._shared = shared
        self._decisions = decisions
        self._decided: dict[str, str] = {}
        self._refreshing = asyncio.Lock()
        self._mined_at: float | None = None
        self._blocked = blocked  # reference files the watcher's last reload blocked
        # One approval at a time (they run in threads); ids written by approvals, with
        # their file, until the watcher has loaded them.
        self._approving = threading.Lock()
        self._written_ids: dict[str, Path] = {}
        self.directory = directory
        self._catalog = catalog
        self._lookup = lookup
        self._single: dict[str, Candidate] = {}
        self.rejected: set[str] = set()
        self.approved: dict[str, Path] = {}
        # Approved candidates stay findable (a second approval answers "already
        # approved"), although their task is no longer mined.
        self._kept: dict[str, Candidate] = {}

    # ------------------------------------------------------------------ feeding

    def observe(self, result: ConversationResult, conversation: Conversation | None) -> bool:
        """Feed one evaluated conversation: used only when it matched no reference.
        Ignored with a shared store: this replica's results come back from it."""
        if self._shared is not None or result.reference_id is not None or conversation is None:
            return False
        return self.miner.add(conversation, result)

    async def refresh(self) -> None:
        """With a shared store, re-mine from it if the last read is `SHARED_REFRESH_S`
        old (one read at a time, in a thread). Raises LookupError (the API's 503) when
        the database cannot be read; the previous candidates stay."""
        if self._shared is None:
            return
        async with self._refreshing:
            now = time.monotonic()
            if self._mined_at is not None and now - self._mined_at < SHARED_REFRESH_S:
                return
            closed = set(self.miner.closed)
            miner, decided = await asyncio.to_thread(self._mine, closed)
            for task in self.miner.closed - closed:  # approved while it was read
                miner.close(task)
            self.miner = miner
            self._decided = decided
            self._mined_at = now

    def _mine(self, closed: set[str]) -> tuple[CandidateMiner, dict[str, str]]:
        """A new miner (same settings, same closed tasks) fed from the shared store,
        and the decisions recorded there."""
        assert self._shared is not None
        decided = self._decisions.decided() if self._decisions is not None else {}
        old = self.miner
        miner = CandidateMiner(
            old.min_conversations,
            min_agreement=old.min_agreement,
            max_tasks=old.max_tasks,
            max_bytes=old.max_bytes,
        )
        miner.closed = closed
        for stored in self._shared(SHARED_MINE_LIMIT):
            if stored.result is not None and stored.result.reference_id is None:
                miner.add(stored.conversation, stored.result)
        miner.candidates()  # the proposals are computed here, not on the event loop
        return miner, decided

    # ------------------------------------------------------------------ reading

    def _state(self, candidate_id: str) -> str:
        if candidate_id in self.approved or (
            self.directory is not None and (self.directory / f"{candidate_id}.yaml").exists()
        ):
            return "approved"
        if candidate_id in self.rejected:
            return "rejected"
        return self._decided.get(candidate_id, "proposed")

    def _referenced(self, candidate: Candidate) -> bool:
        """The task got a reference since (approved, or a person wrote one)."""
        return self._catalog().match_query(candidate.query) is not None

    def proposals(self) -> list[Candidate]:
        out = []
        for c in self.miner.candidates():
            if self._state(c.id) != "proposed":
                continue
            if self._referenced(c):
                self.miner.close(c.query)
                continue
            out.append(c)
        return out

    def find(self, candidate_id: str) -> Candidate | None:
        known = self._single.get(candidate_id) or self._kept.get(candidate_id)
        if known is not None:
            return known
        return next((c for c in self.miner.candidates() if c.id == candidate_id), None)

    def listing(self) -> dict[str, Any]:
        return {
            "candidates": [candidate_json(c) for c in self.proposals()],
            "min_conversations": self.miner.min_conversations,
            "tasks": len(self.miner),
            "dropped_tasks": self.miner.dropped_tasks,
            "writable": self.directory is not None,
            "blocked_reference_files": [
                {"file": f, "reason": why} for f, why in self._blocked().items()
            ],
        }

    def one(self, candidate_id: str) -> dict[str, Any] | None:
        c = self.find(candidate_id)
        return None if c is None else candidate_json(c, self._state(c.id))

    # ------------------------------------------------------------------ changing

    def from_conversation(self, conversation_id: str) -> dict[str, Any] | None:
        """ "Make this a reference": the candidate of one stored conversation (None: no
        such conversation). Its id is derived from the conversation id, so asking twice
        gives the same candidate."""
        stored = self._lookup(conversation_id)
        if stored is None:
            return None
        digest = hashlib.sha256(conversation_id.encode("utf-8")).hexdigest()[:10]
        candidate = single_candidate(stored.conversation, f"conv-{digest}")
        body = candidate_json(candidate, self._state(candidate.id))
        size = len(body["yaml"].encode("utf-8"))
        if size > MAX_YAML_BYTES:
            raise ApprovalError(
                413,
                f"the reference of conversation {conversation_id!r} would be {size:,} bytes "
                f"of YAML, more than an approval takes ({MAX_YAML_BYTES:,}); write it by "
                "hand from the conversation's calls",
            )
        self._single[candidate.id] = candidate
        return body

    def approve(self, candidate_id: str, edited: str | None) -> tuple[int, dict[str, Any]]:
        candidate = self.find(candidate_id)
        if candidate is None:
            return 404, {"error": f"no reference candidate {candidate_id!r}"}
        if self.directory is None:
            return 409, {
                "error": "no reference directory to write to: set candidates.directory "
                "or name a directory in references"
            }
        text = edited if edited is not None else candidate_yaml(candidate)
        with self._approving:
            catalog = self._catalog()
            try:
                written = write_reference(
                    self.directory,
                    f"{candidate.id}.yaml",
                    text,
                    known_ids=lambda i: catalog.by_id(i) is not None or self._unloaded(i),
                )
            except ApprovalError as exc:
                return exc.status, {"error": str(exc)}
            for ref_id in written.reference_ids:
                self._written_ids.setdefault(ref_id, written.path)
        self.approved[candidate.id] = written.path
        self._kept[candidate.id] = candidate
        if self._decisions is not None:
            try:  # the file is written: the other replicas hide it from their next read
                self._decisions.decide(candidate.id, "approved")
            except LookupError as exc:
                log.warning("reference candidate %s approved, not recorded: %s", candidate.id, exc)
        self.rejected.discard(candidate.id)
        self.miner.close(candidate.query)
        log.info("reference candidate %s approved: %s", candidate.id, written.path)
        return (201 if written.created else 200), {
            "id": candidate.id,
            "state": "approved",
            "path": str(written.path),
            "reference_ids": list(written.reference_ids),
            "created": written.created,
        }

    def _unloaded(self, ref_id: str) -> bool:
        """Whether an approval wrote `ref_id` into a file that still exists (the watcher
        may not have loaded it yet)."""
        path = self._written_ids.get(ref_id)
        if path is None:
            return False
        if path.exists():
            return True
        del self._written_ids[ref_id]  # removed by a person since: the id is free
        return False

    def reject(self, candidate_id: str) -> tuple[int, dict[str, Any]]:
        candidate = self.find(candidate_id)
        if candidate is None:
            return 404, {"error": f"no reference candidate {candidate_id!r}"}
        if self._state(candidate_id) == "approved":
            return 409, {"error": f"reference candidate {candidate_id!r} is already approved"}
        if self._decisions is not None:  # blocking: the routes call this in a thread
            try:
                self._decisions.decide(candidate_id, "rejected")
            except LookupError as exc:
                return 503, {"error": str(exc)}
        self.rejected.add(candidate_id)
        return 200, {"id": candidate_id, "state": "rejected"}


def _json(body: Any, status: int = 200) -> web.Response:
    return web.Response(
        status=status,
        body=json.dumps(body, ensure_ascii=False).encode(),
        content_type="application/json",
    )


async def edited_yaml(request: web.Request) -> str | None:
    """The edited YAML of an approval, if any: a JSON body's `yaml`, a form's `yaml`
    field, or a YAML/text body. Raises ValueError for a body it cannot read."""
    if request.content_length is not None and request.content_length > MAX_YAML_BYTES:
        raise ValueError(f"body larger than {MAX_YAML_BYTES} bytes")
    ctype = request.content_type
    if ctype in ("application/x-www-form-urlencoded", "multipart/form-data"):
        form: Mapping[str, Any] = await request.post()
        value = form.get("yaml")
        return value if isinstance(value, str) and value.strip() else None
    raw = await request.read()
    if len(raw) > MAX_YAML_BYTES:
        raise ValueError(f"body larger than {MAX_YAML_BYTES} bytes")
    if not raw.strip():
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("body is not UTF-8") from None
    if ctype == "application/json":
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"body is not JSON: {exc}") from None
        except RecursionError:
            raise ValueError("body is not JSON this collector reads: nested too deeply") from None
        value = data.get("yaml") if isinstance(data, dict) else None
        if value is not None and not isinstance(value, str):
            raise ValueError("`yaml` must be a string")
        return value if value and value.strip() else None
    return text


def candidate_read_routes(candidates: ReferenceCandidates) -> list[GetRoute]:
    async def listing(request: web.Request) -> web.StreamResponse:
        try:
            await candidates.refresh()
        except LookupError as exc:
            return _json({"error": str(exc)}, 503)
        return _json(candidates.listing())

    async def one(request: web.Request) -> web.StreamResponse:
        cid = request.match_info["candidate_id"]
        try:
            await candidates.refresh()
        except LookupError as exc:
            return _json({"error": str(exc)}, 503)
        body = candidates.one(cid)
        if body is None:
            return _json({"error": f"no reference candidate {cid!r}"}, 404)
        return _json(body)

    return [(CANDIDATES_PATH, listing), (CANDIDATE_PATH, one)]


def candidate_write_routes(candidates: ReferenceCandidates) -> list[WriteRoute]:
    async def approve(request: web.Request) -> web.StreamResponse:
        try:
            text = await edited_yaml(request)
        except ValueError as exc:
            return _json({"error": str(exc)}, 400)
        status, body = await asyncio.to_thread(
            candidates.approve, request.match_info["candidate_id"], text
        )
        return _json(body, status)

    async def reject(request: web.Request) -> web.StreamResponse:
        status, body = await asyncio.to_thread(
            candidates.reject, request.match_info["candidate_id"]
        )
        return _json(body, status)

    async def from_conversation(request: web.Request) -> web.StreamResponse:
        cid = request.match_info["conversation_id"]
        try:
            body = await asyncio.to_thread(candidates.from_conversation, cid)
        except ApprovalError as exc:
            return _json({"error": str(exc)}, exc.status)
        if body is None:
            return _json({"error": f"conversation {cid!r} not found"}, 404)
        return _json(body, 201)

    return [
        ("POST", CANDIDATE_PATH + "/approve", approve),
        ("POST", CANDIDATE_PATH + "/reject", reject),
        ("POST", CONVERSATION_REFERENCE_PATH, from_conversation),
    ]
