"""From failing and unreferenced traffic to references, wired for one collector: the
failure-modes endpoint, the reference candidates (fed by evaluated conversations), their
UI pages and the write access guarding what changes state.

`Triage.create` is called by the service once the pipeline has started (its store and
reference watcher exist); `read_routes` go to the receiver's authorized GET routes,
`mount` adds the write routes to the HTTP app before it starts.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from pathlib import Path

from aiohttp import web

from tracepass.collector.api.candidates import (
    SHARED_MINE_LIMIT,
    ReferenceCandidates,
    candidate_read_routes,
    candidate_write_routes,
)
from tracepass.collector.api.failure_modes import failure_mode_routes
from tracepass.collector.api.mode_summaries import ModeSummaries
from tracepass.collector.api.read_model import ReadModel
from tracepass.collector.api.write_access import WriteAccess, mount_write_routes
from tracepass.collector.config import CollectorConfig
from tracepass.collector.pipeline import Pipeline
from tracepass.collector.receiver import GetRoute
from tracepass.collector.state.postgres import PostgresResults
from tracepass.evaluator.judge import LLMJudge
from tracepass.evaluator.references.candidate_mining import CandidateMiner

__all__ = ["WARM_UP_LIMIT", "Triage", "reference_directory"]

log = logging.getLogger(__name__)

# Unreferenced results read back from the state file at start (newest first), so the
# candidates survive a restart without a rescan per request.
WARM_UP_LIMIT = SHARED_MINE_LIMIT


def reference_directory(cfg: CollectorConfig) -> Path | None:
    """Where approved references go: `candidates.directory`, else the first directory
    among `references`."""
    if cfg.candidates.directory is not None:
        return cfg.candidates.directory
    return next((p for p in cfg.references if p.is_dir()), None)


class Triage:
    def __init__(
        self,
        cfg: CollectorConfig,
        pipeline: Pipeline,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.cfg = cfg
        self.pipeline = pipeline
        self.clock = clock
        self.write = WriteAccess(cfg.api.write_token)
        directory = reference_directory(cfg)
        if directory is not None and cfg.candidates.directory is not None:
            directory.mkdir(parents=True, exist_ok=True)
            watched = [p.resolve() for p in pipeline.references.paths]
            if not any(
                directory.resolve() == w or w in directory.resolve().parents for w in watched
            ):
                # Approved references must be loaded by the watcher.
                pipeline.references.paths.append(directory)
        store = pipeline.results.results
        # Several replicas on one database: mine every replica's results, not this one's.
        self._shared = store is not None and store.shared
        self.candidates = ReferenceCandidates(
            CandidateMiner(
                cfg.candidates.min_conversations,
                max_tasks=cfg.candidates.max_tasks,
                max_bytes=cfg.candidates.max_memory_mb * 1024 * 1024,
            ),
            directory,
            catalog=lambda: pipeline.references.catalog,
            lookup=pipeline.latest_result,
            blocked=lambda: dict(getattr(pipeline.references, "blocked", {})),
            shared=store.unreferenced_results if store is not None and self._shared else None,
            decisions=store.candidate_decisions if isinstance(store, PostgresResults) else None,
        )
        # `failure_modes.summarize`: summaries by the evaluator's judge model.
        self.summaries: ModeSummaries | None = None
        judge = getattr(pipeline.evaluator, "judge", None)
        if cfg.failure_modes.summarize and isinstance(judge, LLMJudge):
            self.summaries = ModeSummaries(judge, pipeline.latest_result)
            self.summaries.bind(asyncio.get_running_loop())
        self.pages = None
        if cfg.ui.enabled:
            from tracepass.collector.api.ui.triage import TriagePages

            # The results store the API reads (the shared database's failure modes,
            # with `state.results_url`).
            self.pages = TriagePages(
                pipeline.results.results, self.candidates, self.write, clock, self.summaries
            )

    def warm_up(self) -> int:
        """Feed the unreferenced results stored by earlier runs; returns how many. None
        with a shared store: the candidates are mined from it when asked for."""
        store = self.pipeline.results.results
        if store is None or self._shared:
            return 0
        fed = 0
        for stored in store.unreferenced_results(WARM_UP_LIMIT):
            if stored.result is not None and self.candidates.observe(
                stored.result, stored.conversation
            ):
                fed += 1
        return fed

    def read_routes(self, model: ReadModel) -> list[GetRoute]:
        routes = [
            *failure_mode_routes(model, self.clock, self.summaries),
            *candidate_read_routes(self.candidates),
        ]
        if self.pages is not None:
            routes += self.pages.read_routes()
        return routes

    def mount(self, app: web.Application | None) -> None:
        if app is None:
            return
        routes = candidate_write_routes(self.candidates)
        if self.pages is not None:
            routes += self.pages.write_routes()
        mount_write_routes(app, self.write, routes)
