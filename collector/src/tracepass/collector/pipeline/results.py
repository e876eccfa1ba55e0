"""The results link of the chain: every evaluation is stored before anything else sees it.

`ResultsWriter` is the first `ResultComponent` of the chain. It writes the result (and the
rolling windows' journal entry, in the same group commit) through the local state file,
hands the journal sequence number on to the links after it, and answers the API's
"latest evaluation of this conversation" from memory first, then from the results store.

When the write fails (disk full) the result still goes on down the chain (the windows
must not miss evaluations the API shows), and the write is retried in the background
until it succeeds; meanwhile the API finds the result in `_unstored`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from tracepass.collector.pipeline.components import ResultComponent
from tracepass.collector.pipeline.scheduling import ResultInfo
from tracepass.collector.state import ResultsStore, StateError, StateStore, StoredResult
from tracepass.evaluator.models import ConversationResult
from tracepass.evaluator.ratelimited_log import RateLimitedLog

__all__ = ["STORED_RESULTS_IN_MEMORY", "ResultsWriter"]

log = logging.getLogger(__name__)

# Evaluated results kept in memory when a state file holds them all (see __init__).
STORED_RESULTS_IN_MEMORY = 256


class ResultsWriter(ResultComponent):
    name = "results store"

    def __init__(
        self,
        store: StateStore | None,
        *,
        results: ResultsStore | None = None,
        journal_entry: Callable[[ConversationResult], str] | None = None,
        cache_size: int = 10_000,
    ) -> None:
        self.store = store
        # Where stored results are read back (the state file's own results, or a shared
        # database the state file forwards them to).
        self.results: ResultsStore | None = results
        if results is None and store is not None:
            self.results = store.results
        # What the window journal keeps of each result (the rolling windows' entry,
        # supplied by whoever owns the windows); None: no journal.
        self.journal_entry = journal_entry
        # With a results store every stored result is read back from it, so memory keeps
        # only the newest few (the API's hot path). Why not 10,000 as without one: each
        # is a conversation and its result as ~60 live objects that every full GC pass
        # scans; 10,000 of them made full collections pause the loop for ~300 ms.
        self._cache_size = (
            cache_size if store is None else min(cache_size, STORED_RESULTS_IN_MEMORY)
        )
        self._cache: OrderedDict[str, StoredResult] = OrderedDict()
        # Results whose storage failed (disk full) and is retried: the API must still
        # find them, however many results were evaluated since.
        self._unstored: dict[str, StoredResult] = {}
        self._retries: set[asyncio.Task[None]] = set()
        self._stopping = False
        self._log = RateLimitedLog(log)

    async def shutdown(self) -> None:
        """Stop retrying: what could not be stored is re-evaluated from its stored spans
        at the next start (its result row never reached the file)."""
        self._stopping = True
        for task in list(self._retries):
            task.cancel()
        if self._retries:
            await asyncio.gather(*self._retries, return_exceptions=True)

    async def on_result(self, result: ConversationResult, info: ResultInfo) -> ResultInfo | None:
        key = info.conversation.id
        stored = StoredResult(info.conversation, result, info.revision)
        self.remember(key, stored)
        if self.store is None:
            return None
        write = self._writer(key, stored, info)
        try:
            seq = await write()
        except StateError as exc:
            # Disk full or I/O trouble: the evaluation still reaches the windows and the
            # API now, and its storage is retried in the background until the disk has
            # room (a crash meanwhile re-evaluates it from the stored spans).
            self._log.error(
                "put_result",
                "result of conversation %s not stored, retrying in the background: %s",
                key,
                exc,
            )
            self._unstored[key] = stored
            self._retry_in_background(key, write)
            return None
        return dataclasses.replace(info, journal_seq=seq)

    def _writer(
        self, key: str, stored: StoredResult, info: ResultInfo
    ) -> Callable[[], Awaitable[int]]:
        store = self.store
        assert store is not None
        assert stored.result is not None
        journal = None if self.journal_entry is None else self.journal_entry(stored.result)

        def write() -> Awaitable[int]:
            return store.results.put_result(
                key,
                revision=info.revision,
                closed_at=info.closed_at,
                n_spans=info.n_spans,
                stored=stored,
                evaluated_at=info.now,
                journal=journal,
            )

        return write

    def _retry_in_background(self, key: str, write: Callable[[], Awaitable[int]]) -> None:
        async def retry() -> None:
            delay = 0.5
            while not self._stopping:
                await asyncio.sleep(delay)
                try:
                    await write()
                except StateError:
                    delay = min(delay * 2, 30.0)
                    continue
                self._log.info("stored_after_retry", "result of %s stored after a retry", key)
                self._unstored.pop(key, None)
                return

        task = asyncio.create_task(retry(), name=f"tracepass-store-retry-{key}")
        self._retries.add(task)
        task.add_done_callback(self._retries.discard)

    @property
    def retrying(self) -> int:
        """Evaluations whose storage is being retried (disk full)."""
        return len(self._retries)

    def remember(self, key: str, stored: StoredResult) -> None:
        self._cache[key] = stored
        self._cache.move_to_end(key)
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)

    def forget_cached(self) -> None:
        """Drop the cache (memory pressure); the unstored ones stay: nothing else has them."""
        self._cache.clear()

    def latest(self, key: str, *, read_store: bool = True) -> StoredResult | None:
        """The latest evaluation of `key`: memory first, then the results store."""
        stored = self._cache.get(key) or self._unstored.get(key)
        if stored is None and read_store and self.results is not None:
            stored = self.results.get_result(key)
        return stored
