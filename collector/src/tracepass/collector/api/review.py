"""The live review queue for one collector (docs/review.md "The live queue"):

    GET  /api/v1/review/queue                        queued conversations (pending first)
    GET  /api/v1/review/labels                       the labels people gave
    GET  /api/v1/review/agreement                    Cohen's kappa of people vs each judge
    POST /api/v1/conversations/{id}/review           queue a conversation (write)
    POST /api/v1/review/{id}/label                   label it (write)

Results are queued by the `review.rules` as they are stored (`observe`, a result
listener). The statistics are `evaluator.offline.human_review.live_agreement`, the ones
`tracepass review import` reports, over the labels and the latest stored evaluations.
The labels live in the state file (`state/review_labels.py`) or, with a shared
PostgreSQL results store (`state.results_url`), in the database (`state/pg_review.py`:
a label given on one replica shows on all of them, and the agreement pools them).
Without either, every route answers 503; so does a database that cannot be reached.
Write routes go through `WriteAccess` (404 without `api.write_token`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import asdict
from typing import Any

from aiohttp import web

from tracepass.collector.api.params import ParamError
from tracepass.collector.api.read_model import ReadModel
from tracepass.collector.api.write_access import WriteAccess, WriteRoute, mount_write_routes
from tracepass.collector.config import CollectorConfig
from tracepass.collector.pipeline import Pipeline, ResultInfo, ReviewRules
from tracepass.collector.receiver import GetRoute
from tracepass.collector.state import (
    ModeScope,
    ReviewLabel,
    ReviewLabels,
    ReviewStore,
    StoredResult,
)
from tracepass.evaluator.judge import agreement
from tracepass.evaluator.models import ConversationResult
from tracepass.evaluator.offline.human_review import live_agreement
from tracepass.evaluator.ratelimited_log import RateLimitedLog
from tracepass.evaluator.scoring.explain import failure_analysis

__all__ = [
    "AGREEMENT_PATH",
    "LABELS_PATH",
    "QUEUE_PATH",
    "LabelError",
    "ReviewQueue",
    "parse_label_fields",
]

log = logging.getLogger(__name__)

QUEUE_PATH = "/api/v1/review/queue"
LABELS_PATH = "/api/v1/review/labels"
AGREEMENT_PATH = "/api/v1/review/agreement"
ENQUEUE_PATH = "/api/v1/conversations/{conversation_id}/review"
LABEL_PATH = "/api/v1/review/{conversation_id}/label"
MAX_COMMENT_CHARS = 10_000
MAX_REVIEWER_CHARS = 200
# A turn index as the label's `turns` keys spell it: "0" or digits without a leading 0,
# at most 9 of them (no conversation has a billion turns).
_TURN_KEY = re.compile(r"0|[1-9][0-9]{0,8}", re.ASCII)
MAX_LIST = 1000
# Results kept in memory for the review rules while the shared database is unreachable,
# and how often it is tried again.
MAX_PENDING = 10_000
RETRY_S = 5.0


class LabelError(ValueError):
    """A label request that cannot be stored (400, the message names the field)."""


def _json(body: Any, status: int = 200) -> web.Response:
    return web.Response(
        status=status,
        body=json.dumps(body, ensure_ascii=False).encode(),
        content_type="application/json",
    )


def _verdict(value: object, field: str) -> bool | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        return agreement.parse_label(value)
    except ValueError as exc:
        raise LabelError(f"{field}: {exc}") from None


def parse_label_fields(
    conversation_id: str,
    passed: object,
    turns: Mapping[str, object],
    comment: object,
    reviewer: object,
    *,
    n_turns: int,
    at: float,
) -> ReviewLabel:
    """A label from request fields (JSON or form), or LabelError naming the bad field.
    Verdicts read like `review import`'s labels (pass/fail, yes/no, true/false, 1/0);
    empty ones are "not labelled"; at least one verdict is required."""
    verdicts: dict[int, bool] = {}
    for key, value in turns.items():
        # ASCII digits, no sign, no leading zero: `int()` also read "-0", " 1" and "٠"
        # as turns 0 and 1, so {"0": "fail", "-0": "pass"} silently stored pass.
        if not (isinstance(key, str) and _TURN_KEY.fullmatch(key)):
            raise LabelError(f"turns: {str(key)[:40]!r} is not a turn index (0, 1, 2, …)")
        index = int(key)
        if not 0 <= index < n_turns:
            raise LabelError(f"turns: the conversation has no turn {index} (0–{n_turns - 1})")
        verdict = _verdict(value, f"turns.{index}")
        if verdict is not None:
            verdicts[index] = verdict
    overall = _verdict(passed, "passed")
    if overall is None and not verdicts:
        raise LabelError("passed: give a verdict on the conversation or on a turn")
    if comment is not None and not isinstance(comment, str):
        raise LabelError("comment: must be a string")
    if comment is not None and len(comment) > MAX_COMMENT_CHARS:
        raise LabelError(f"comment: longer than {MAX_COMMENT_CHARS} characters")
    if reviewer is not None and not isinstance(reviewer, str):
        raise LabelError("reviewer: must be a string")
    if reviewer is not None and len(reviewer) > MAX_REVIEWER_CHARS:
        raise LabelError(f"reviewer: longer than {MAX_REVIEWER_CHARS} characters")
    for name, text in (("comment", comment), ("reviewer", reviewer)):
        if isinstance(text, str) and "\x00" in text:  # no database text holds NUL
            raise LabelError(f"{name}: a NUL character (U+0000) is not allowed")
    return ReviewLabel(
        conversation_id=conversation_id,
        passed=overall,
        turns=verdicts,
        comment=comment or "",
        reviewer=reviewer or None,
        labelled_at=at,
    )


def label_json(label: ReviewLabel) -> dict[str, Any]:
    body = asdict(label)
    body["turns"] = {str(k): v for k, v in sorted(label.turns.items())}
    return body


class ReviewQueue:
    """Queue, labels and agreement of one collector (see the module docstring)."""

    def __init__(
        self,
        cfg: CollectorConfig,
        pipeline: Pipeline,
        clock: Callable[[], float] = time.time,
        write: WriteAccess | None = None,
        labels: ReviewStore | None = None,
    ) -> None:
        """`labels`: where the queue lives (default: the state file's tables; the
        shared database's with `state.results_url`)."""
        self.cfg = cfg
        self.pipeline = pipeline
        self.clock = clock
        self.write = write if write is not None else WriteAccess(cfg.api.write_token)
        self.pages: Any = None  # `ui/review.py` ReviewPages, with the UI on (`routes`)
        store = pipeline.store
        self.shared = labels is not None
        self.labels: ReviewStore | None = labels
        if labels is None and store is not None:
            self.labels = ReviewLabels(store)
        # The failure modes the results are compared with (the API's: every replica's).
        self.results = pipeline.results.results
        self.rules = ReviewRules(
            cfg.review,
            threshold=cfg.evaluation.threshold,
            new_failure_mode=self._new_failure_mode if self.results is not None else None,
        )
        # Results the rules have not been applied to yet (shared database only), and
        # the task applying them.
        self._pending: deque[tuple[ConversationResult, bool, float]] = deque()
        self._worker: asyncio.Task[None] | None = None
        self._log = RateLimitedLog(log)

    async def open(self) -> None:
        if self.labels is not None:
            await self.labels.open()

    # ------------------------------------------------------------------ rules

    def _new_failure_mode(self, result: ConversationResult, complete: bool) -> bool:
        store = self.results
        if store is None or result.agent_version is None:
            return False
        index = store.failure_modes
        previous = index.previous_version(result.agent_name, result.agent_version)
        if previous is None:
            return False  # a first version has no baseline: nothing is new
        known = index.signatures_of_version(ModeScope(result.agent_name, previous))
        return any(s not in known for s in failure_analysis(result, complete).signatures)

    async def observe(self, result: ConversationResult, info: ResultInfo) -> None:
        """Result listener: queue `result` when a rule says so (idempotent)."""
        if self.labels is None or not self.rules.rules:
            return
        if not self.shared:
            reason = self.rules.reason(result, info.conversation.complete)
            if reason is not None:
                await self.labels.enqueue(result.conversation_id, reason, info.now)
            return
        # The shared database: the rules (`new_failure_mode` reads it) and the queue
        # writes run in a task of their own, so a database that is down delays the
        # queue, never the result chain; what waits is kept in memory (bounded).
        if len(self._pending) >= MAX_PENDING:
            self._log.error("review-pending", "review queue: %d results waiting for the "
                            "database; %s not considered", MAX_PENDING,
                            result.conversation_id)  # fmt: skip
            return
        self._pending.append((result, info.conversation.complete, info.now))
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._drain(self.labels))

    async def _drain(self, labels: ReviewStore) -> None:
        """Apply the rules to the waiting results and queue them in the shared database,
        oldest first; retried every `RETRY_S` while the database is unreachable."""
        while self._pending:
            result, complete, at = self._pending[0]
            try:
                reason = await asyncio.to_thread(self.rules.reason, result, complete)
                if reason is not None:
                    await labels.enqueue(result.conversation_id, reason, at)
            except LookupError as exc:
                self._log.warning("review-queue", "review queue: %d results wait for the "
                                  "database: %s", len(self._pending), exc)  # fmt: skip
                await asyncio.sleep(RETRY_S)
                continue
            self._pending.popleft()

    # ------------------------------------------------------------------ reads

    def _require(self) -> ReviewStore:
        if self.labels is None:
            raise LookupError("the review queue needs a state file (state.path)")
        return self.labels

    def stored(self, conversation_id: str) -> StoredResult | None:
        stored = self.pipeline.latest_result(conversation_id)
        return stored if stored is not None and stored.result is not None else None

    def queue_json(self, query: Mapping[str, str]) -> dict[str, Any]:
        labels = self._require()
        pending = query.get("pending", "true").lower() not in ("false", "0", "no")
        try:
            limit = int(query.get("limit", "100"))
        except ValueError:
            raise ParamError("limit", "not an integer") from None
        if not 1 <= limit <= MAX_LIST:
            raise ParamError("limit", f"must be between 1 and {MAX_LIST}, got {limit}")
        queued, labelled = labels.counts()
        items = labels.queue(pending_only=pending, limit=limit)
        return {
            "items": [asdict(i) for i in items],
            "queued": queued,
            "labelled": labelled,
            "pending": queued - labelled,
        }

    def labels_json(self) -> dict[str, Any]:
        return {"labels": [label_json(x) for x in self._require().labels()]}

    def agreement_json(self) -> dict[str, Any]:
        """People vs each judge over every label whose conversation is still stored."""
        found = []
        missing = 0
        for label in self._require().labels():
            stored = self.stored(label.conversation_id)
            if stored is None or stored.result is None:
                missing += 1  # purged by results retention: its label no longer counts
                continue
            found.append((stored.result.model_dump(mode="json"), label.passed, label.turns))
        return {"labelled": len(found), "missing_results": missing, "judges": live_agreement(found)}

    # ------------------------------------------------------------------ writes

    async def enqueue(self, conversation_id: str) -> tuple[int, dict[str, Any]]:
        labels = self._require()
        if self.stored(conversation_id) is None:
            return 404, {"error": f"no evaluated conversation {conversation_id!r}"}
        created = await labels.enqueue(conversation_id, "manual", self.clock())
        return (201 if created else 200), {"conversation_id": conversation_id, "queued": True}

    async def put_label(
        self,
        conversation_id: str,
        passed: object,
        turns: Mapping[str, object],
        comment: object = None,
        reviewer: object = None,
    ) -> tuple[int, dict[str, Any]]:
        labels = self._require()
        stored = self.stored(conversation_id)
        if stored is None or stored.result is None:
            return 404, {"error": f"no evaluated conversation {conversation_id!r}"}
        try:
            label = parse_label_fields(
                conversation_id,
                passed,
                turns,
                comment,
                reviewer,
                n_turns=len(stored.result.turns),
                at=self.clock(),
            )
        except LabelError as exc:
            return 400, {"error": str(exc)}
        await labels.put_label(label)
        return 200, {"label": label_json(label)}

    # ------------------------------------------------------------------ routes

    async def start(self, model: ReadModel) -> list[GetRoute]:
        """Open the tables, then `routes`."""
        await self.open()
        return self.routes(model)

    def routes(self, model: ReadModel) -> list[GetRoute]:
        """Every read route: the API's and, with the UI on, the queue page's."""
        routes = self.read_routes(model)
        if self.cfg.ui.enabled:
            from tracepass.collector.api.ui.review import ReviewPages
            from tracepass.collector.api.ui.security import allowed_hosts

            hosts = allowed_hosts(self.cfg.ui.allowed_hosts, self.cfg.receiver.host)
            self.pages = ReviewPages(self, self.write, hosts)
            routes += self.pages.read_routes()
        return routes

    def mount(self, app: web.Application | None) -> None:
        """The write routes (API and UI) on the HTTP app, behind `WriteAccess`."""
        if app is None:
            return
        routes = self.write_routes()
        if self.pages is not None:
            routes += self.pages.write_routes()
        mount_write_routes(app, self.write, routes)

    def read_routes(self, model: ReadModel) -> list[GetRoute]:
        """Answered like the other lists (`routes._answer`): bounded parameters, the
        query off the event loop under the read model's time limit."""
        from tracepass.collector.api.routes import _answer

        async def answer(
            request: web.Request, compute: Callable[[], dict[str, Any]]
        ) -> web.StreamResponse:
            try:
                return await _answer(model, request, compute)
            except LabelError as exc:
                return _json({"error": str(exc)}, status=400)

        async def queue(request: web.Request) -> web.StreamResponse:
            return await answer(request, lambda: self.queue_json(request.query))

        async def labels(request: web.Request) -> web.StreamResponse:
            return await answer(request, self.labels_json)

        async def agreement_(request: web.Request) -> web.StreamResponse:
            return await answer(request, self.agreement_json)

        return [(QUEUE_PATH, queue), (LABELS_PATH, labels), (AGREEMENT_PATH, agreement_)]

    def write_routes(self) -> list[WriteRoute]:
        async def enqueue(request: web.Request) -> web.StreamResponse:
            try:
                status, body = await self.enqueue(request.match_info["conversation_id"])
            except LookupError as exc:
                return _json({"error": str(exc)}, status=503)
            return _json(body, status=status)

        async def label(request: web.Request) -> web.StreamResponse:
            try:
                doc = await request.json()
            except (ValueError, UnicodeDecodeError, RecursionError):
                return _json({"error": "body: not JSON (or nested too deeply)"}, status=400)
            if not isinstance(doc, dict):
                return _json({"error": "body: expected a JSON object"}, status=400)
            turns = doc.get("turns") or {}
            if not isinstance(turns, dict):
                return _json({"error": "turns: expected an object (turn index → verdict)"}, 400)
            try:
                status, body = await self.put_label(
                    request.match_info["conversation_id"],
                    doc.get("passed"),
                    turns,
                    doc.get("comment"),
                    doc.get("reviewer"),
                )
            except LookupError as exc:
                return _json({"error": str(exc)}, status=503)
            return _json(body, status=status)

        return [("POST", ENQUEUE_PATH, enqueue), ("POST", LABEL_PATH, label)]
