"""The rolling windows' durable life, in one component: restore, replay, persist.

The windows (`evaluator/stats/rolling.py`, held by `EvaluationMetrics` through
`metric_windows.py`) are a cache of evaluated outcomes that must survive restarts and
`kill -9`:

- `start()` restores the last snapshot from the state file (`AGGREGATOR_BLOB`) and
  replays the window-journal entries committed after it (evaluations up to a crash),
  so the windows equal those of a run that never stopped;
- `on_result` notes the journal sequence number the results store wrote for each
  evaluation (the chain runs this link after the store and after the metrics link,
  which adds the result to the windows: a snapshot never claims an entry it lacks);
- a background task persists a snapshot every `persist_interval_s` when something
  changed, and `shutdown()` persists a last one (the state file is still open then).

The snapshot records the journal position it includes, and the store drops those
entries in the same transaction (`state/window_journal.py`). What the journal keeps of
each result is this room's encoder (`judge_series.journal_entry`): the component offers
it through the chain (`journal_encoder`), and the results store, earlier in the chain,
takes it when the chain starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from tracepass.collector.export.windows.judge_series import journal_entry
from tracepass.collector.export.windows.window_entry import (
    WindowEntry,
    decode_entries,
    window_entry,
)
from tracepass.collector.pipeline import ResultComponent, ResultInfo
from tracepass.collector.state import JOURNAL_RESULT, JOURNAL_WINDOW, StateStore
from tracepass.evaluator.models import ConversationResult
from tracepass.evaluator.stats.rolling import RollingAggregator, StateCapture

if TYPE_CHECKING:
    from tracepass.collector.export.metrics import EvaluationMetrics

__all__ = ["AGGREGATOR_BLOB", "RollingWindows", "replay_entry", "replay_result"]

log = logging.getLogger(__name__)

AGGREGATOR_BLOB = "rolling_aggregator"


class RollingWindows(ResultComponent):
    """Restores, journals and persists the windows `metrics` holds (`store` None: the
    windows live in memory only)."""

    name = "rolling windows"

    def __init__(
        self,
        store: StateStore | None,
        metrics: EvaluationMetrics,
        *,
        persist_interval_s: float = 30.0,
    ) -> None:
        self.store = store
        self.metrics = metrics
        self.persist_interval_s = persist_interval_s
        self._journal_applied = 0  # highest window-journal entry in the windows
        self._changes = 0  # evaluations seen (the persist loop skips idle intervals)
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        if self.store is None:
            return
        self._restore(self.store)
        self._replay(self.store)
        self._task = asyncio.create_task(self._persist_loop(), name="tracepass-persist")

    async def shutdown(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
            await self.persist()

    def journal_encoder(self) -> Callable[[ConversationResult], str] | None:
        """What the window journal keeps of a result (None: no state file, nothing to
        replay)."""
        return None if self.store is None else journal_entry

    def on_result(self, result: ConversationResult, info: ResultInfo) -> None:
        if info.journal_seq is not None:
            self._journal_applied = max(self._journal_applied, info.journal_seq)
        self._changes += 1

    # ------------------------------------------------------------------ restore

    def _restore(self, store: StateStore) -> None:
        config = self.metrics.aggregator.config
        blob = store.get_blob(AGGREGATOR_BLOB)
        if blob is None:
            return
        try:
            agg = RollingAggregator.from_state(json.loads(blob), config)
        except (ValueError, KeyError, TypeError) as exc:
            # The windows are a cache of evaluated outcomes: losing them costs history,
            # refusing to start would cost the service. Say so loudly.
            log.error(
                "%s: rolling windows could not be restored, starting empty: %s", store.path, exc
            )
            return
        self.metrics.windows.adopt(agg)
        self.metrics.seed_labels(agg)
        log.info("restored rolling windows for %d keys from %s", len(agg), store.path)

    def _replay(self, store: StateStore) -> None:
        """Evaluations committed after the restored snapshot (up to a crash) go back into
        the windows from the journal; entries this process writes arrive by `on_result`."""
        metrics = self.metrics
        upto = store.journal_upto(AGGREGATOR_BLOB)
        self._journal_applied = upto
        entries = store.window_journal(upto, store.journal_seq_at_open)
        replayed = bad = 0
        for entry in entries:
            try:
                if entry.format == JOURNAL_RESULT:  # written before schema version 5
                    result = ConversationResult.model_validate_json(entry.text)
                    added = replay_result(
                        metrics, result, revision=entry.revision, now=entry.evaluated_at
                    )
                elif entry.format == JOURNAL_WINDOW:
                    added = False
                    for window in decode_entries(entry.text):  # + judge series' entries
                        added |= replay_entry(
                            metrics, window, revision=entry.revision, now=entry.evaluated_at
                        )
                else:
                    raise ValueError(f"unknown journal entry format {entry.format}")
            except ValueError as exc:
                bad += 1
                log.error("%s: window journal entry %d unreadable: %s", store.path, entry.seq, exc)
                continue
            if added:
                replayed += 1
            self._journal_applied = max(self._journal_applied, entry.seq)
        if entries:
            log.info(
                "rolling windows: %d evaluations replayed from the journal of %s (%d unreadable)",
                replayed,
                store.path,
                bad,
            )

    # ------------------------------------------------------------------ persist

    async def persist(self) -> None:
        """Write the windows' snapshot into the state file (no-op when it is closed)."""
        store = self.store
        if store is None or not store.is_open:
            return
        # A point-in-time copy under the windows' lock (tens of ms at a million entries);
        # encoding it costs far more and runs in a worker thread, so neither the
        # receivers nor `record` wait for it. Every journal entry up to `upto` is in the
        # capture (entries are applied in commit order); the store drops them with the
        # snapshot, atomically.
        capture, upto = self.metrics.windows.capture(lambda: self._journal_applied)
        handover = [capture]
        del capture  # `_encode_state` frees the copy once encoded (see there)
        blob = await asyncio.to_thread(_encode_state, handover)
        await asyncio.wrap_future(store.put_blob(AGGREGATOR_BLOB, blob, journal_upto=upto))

    async def _persist_loop(self) -> None:
        last = -1
        while True:
            await asyncio.sleep(self.persist_interval_s)
            if self._changes == last:
                continue
            last = self._changes
            try:
                await self.persist()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("persisting the rolling windows failed")


def replay_entry(
    metrics: EvaluationMetrics, entry: WindowEntry, *, revision: int, now: float
) -> bool:
    """Put a journalled evaluation back into the windows (crash recovery), exactly as
    `record` added it, under the labels it maps to now, without counting it again or
    emitting its event: the counters and events of a previous process are not this
    process's. Idempotent: an entry the restored snapshot already holds is a stale
    revision and changes nothing. Returns whether it changed the windows."""
    return metrics.windows.add(metrics.key_of(entry), entry, revision, now).accepted


def replay_result(
    metrics: EvaluationMetrics, result: ConversationResult, *, revision: int, now: float
) -> bool:
    """`replay_entry` of a whole result (journals written before schema version 5)."""
    return replay_entry(metrics, window_entry(result), revision=revision, now=now)


def _encode_state(handover: list[StateCapture]) -> bytes:
    """The captured windows as JSON bytes (in a worker thread: the capture is a copy, so
    nothing here touches the live aggregator). Every stage is dropped as soon as the
    next exists (the capture once encoded into the state, the state once serialized):
    this runs every `persist_interval_s`; with buckets its size follows keys x buckets
    and one revision horizon of conversations, not the longest window's traffic."""
    state = handover.pop().to_state()
    text = json.dumps(state, separators=(",", ":"), allow_nan=False)
    del state
    return text.encode()
