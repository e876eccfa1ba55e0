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
from collections.abc import Awaitable, Callable, Sequence

from tracepass.collector.pipeline.components import ResultComponent
from tracepass.collector.pipeline.scheduling import ResultInfo
from tracepass.collector.state import (
    ResultsStore,
    ResultWrite,
    StateError,
    StateStore,
    StoredResult,
)
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
        # offered through the chain by the windows' component, `use_journal_encoder`);
        # None: no journal.
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
        return (await self.on_results([result], [info]))[0]

    async def on_results(
        self, results: Sequence[ConversationResult], infos: Sequence[ResultInfo]
    ) -> list[ResultInfo | None]:
        """`on_result` for a batch (`ResultChain.run_batch`): ONE write of all of them
        (`SqliteResults.put_results`: one writer operation, one wake-up). If it fails
        (disk full, or one result the database refuses), each is stored on its own as
        `on_result` does, so one bad result costs no other its row."""
        stored = [
            StoredResult(info.conversation, result, info.revision)
            for result, info in zip(results, infos, strict=True)
        ]
        for s, info in zip(stored, infos, strict=True):
            self.remember(info.conversation.id, s)
        if self.store is None:
            return [None] * len(stored)
        writes = [self._write_of(s, info) for s, info in zip(stored, infos, strict=True)]
        if len(writes) == 1:
            return [await self._store_one(writes[0], infos[0])]
        try:
            seqs = await self.store.results.put_results(writes)
        except Exception as exc:
            log.debug("batch of %d results not stored at once (%s): one by one", len(writes), exc)
            done = await asyncio.gather(
                *(self._store_one(w, i) for w, i in zip(writes, infos, strict=True)),
                return_exceptions=True,
            )
            out: list[ResultInfo | None] = []
            for write, step in zip(writes, done, strict=True):
                if isinstance(step, BaseException):
                    log.error("result of conversation %s not stored: %r", write.key, step)
                    step = None
                out.append(step)
            return out
        return [dataclasses.replace(i, journal_seq=q) for i, q in zip(infos, seqs, strict=True)]

    def use_journal_encoder(self, encoder: Callable[[ConversationResult], str]) -> None:
        if self.journal_entry is None:
            self.journal_entry = encoder

    def _write_of(self, stored: StoredResult, info: ResultInfo) -> ResultWrite:
        assert stored.result is not None
        return ResultWrite(
            info.conversation.id,
            info.revision,
            info.closed_at,
            info.n_spans,
            stored,
            info.now,
            None if self.journal_entry is None else self.journal_entry(stored.result),
        )

    async def _store_one(self, write: ResultWrite, info: ResultInfo) -> ResultInfo | None:
        """Store one result; on a `StateError` keep it findable and retry it in the
        background. Returns the info with its journal sequence number (None: not
        stored yet)."""
        store = self.store
        assert store is not None

        async def put() -> int:
            return (await store.results.put_results([write]))[0]

        try:
            seq = await put()
        except StateError as exc:
            # Disk full or I/O trouble: the evaluation still reaches the windows and the
            # API now, and its storage is retried in the background until the disk has
            # room (a crash meanwhile re-evaluates it from the stored spans).
            self._log.error(
                "put_result",
                "result of conversation %s not stored, retrying in the background: %s",
                write.key,
                exc,
            )
            self._unstored[write.key] = write.stored
            self._retry_in_background(write.key, put)
            return None
        return dataclasses.replace(info, journal_seq=seq)

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
