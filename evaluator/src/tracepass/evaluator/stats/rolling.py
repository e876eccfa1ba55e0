"""Rolling pass@k / pass^k over sliding time windows, a decayed window and a CUSUM.

The collector feeds every evaluated conversation here; the exporter reads snapshots.
This module is pure (no clock, no I/O): every call takes `now`, so tests are exact and
the collector decides what time means (evaluation time).

Design, and why (docs/statistics.md, section 5):

* Memory depends on the number of series, not on traffic. Per key (agent_name,
  agent_version, reference_set) outcomes are counted in time buckets of
  `bucket_s` seconds (`_rolling_buckets.py`): per bucket and task (reference id) n and
  c. A sliding window of W seconds holds the last ceil(W / bucket_s) buckets, the
  current one included, with running totals (n, c and per task, for the tau-bench
  estimator), so `add` and expiry stay amortized O(number of windows). A 24 h window
  at 150 conversations/s costs 1,440 buckets per key instead of 13 million entries.
* Per-task counts let the tau-bench estimator (mean over tasks of C(c,k)/C(n,k)) be
  computed per window; pooled plug-in and Bayesian values use the window's totals.
  Those inputs are exactly what a per-entry window over the same bucket edges counts
  (tested against the previous per-entry aggregator: tests/evaluator/
  test_rolling_buckets.py).
* The decayed ("fast") window weighs an outcome 2^(-age/half_life) from its exact
  time; counts are fractional, so only the plug-in and Bayesian estimators exist there.
* Revisions: a later revision of the same conversation replaces the earlier outcome
  (removed from its bucket, from every window still holding it and, by its exact
  weight, from the decayed window) and is added at `now`. Stale revisions (<= the one
  held) are ignored. What each conversation contributed is kept in the conversation
  index (`_rolling_index.py`) for `revision_horizon_s` after its last evaluation only
  (bounded memory); a revision later than that counts as a new conversation.
* Outcome `None` (e.g. the judge failed) is not evidence about the agent: the
  conversation is indexed (so revisions still supersede it) but counted in no n or c.
* The CUSUM sees each conversation once: its first countable outcome. Re-feeding a
  revised outcome would double count it, and un-feeding a sequential statistic is not
  possible (docs/statistics.md).
* Minimum-sample guard: a window with n < min_conversations reports n and c but no
  estimates, so a quiet period exports no value rather than a scary 0.
"""

from __future__ import annotations

import gc
import math
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tracepass.evaluator.stats._rolling_buckets import BucketStream, Decayed, bucket_items
from tracepass.evaluator.stats._rolling_config import RollingConfig
from tracepass.evaluator.stats._rolling_index import ConversationIndex, conversation_hash
from tracepass.evaluator.stats._rolling_legacy import (
    NOT_COUNTED,
    Columns,
    decode_columns,
    decode_columns_v1,
)
from tracepass.evaluator.stats._rolling_state import (
    BucketCapture,
    StateCapture,
    decode_buckets,
    decode_index,
)
from tracepass.evaluator.stats._rolling_upgrade import legacy_buckets, legacy_index, rebucket
from tracepass.evaluator.stats.cusum import BernoulliCusum
from tracepass.evaluator.stats.passk import PassKEstimate, estimate_many, tau_bench_means
from tracepass.evaluator.vocabulary import PASS_AT_K, PASS_POW_K

__all__ = [
    "AddResult",
    "Key",
    "KeySnapshot",
    "RollingAggregator",
    "RollingConfig",
    "StateCapture",
    "WindowEstimate",
    "WindowSnapshot",
]

Key = tuple[str, str, str]  # (agent_name, agent_version, reference_set)


# --------------------------------------------------------------------------- results


@dataclass(frozen=True, slots=True)
class WindowEstimate:
    k: int
    pass_at_k: PassKEstimate
    pass_pow_k: PassKEstimate
    tasks_used: int  # tasks with n_i >= k entering the unbiased mean


@dataclass(frozen=True, slots=True)
class WindowSnapshot:
    window: str
    n: float
    c: float
    tasks: int
    # Empty when n < min_conversations (the guard): export nothing for the estimates.
    estimates: Mapping[int, WindowEstimate]

    @property
    def sufficient(self) -> bool:
        return bool(self.estimates)


@dataclass(frozen=True, slots=True)
class KeySnapshot:
    key: Key
    windows: tuple[WindowSnapshot, ...]
    cusum: float
    cusum_observations: int


@dataclass(frozen=True, slots=True)
class AddResult:
    accepted: bool  # False: stale revision, ignored
    replaced: bool  # an earlier revision's outcome was removed
    previous_success: bool | None = None
    previous_key: Key | None = None
    previous_tag: str = ""  # the caller's tag of the replaced entry (e.g. its outcome)


_ACCEPTED = AddResult(accepted=True, replaced=False)
_STALE = AddResult(accepted=False, replaced=False)
_REVISION_LIMIT = 1 << 63  # revisions are stored as signed 64-bit ints
_STREAM_LIMIT = 1 << 32  # key numbers are stored as unsigned 32-bit ints


class RollingAggregator:
    """Windows of conversation outcomes per key; see the module docstring."""

    def __init__(self, config: RollingConfig | None = None) -> None:
        self.config = cfg = config or RollingConfig()
        self._streams: dict[Key, BucketStream] = {}
        self._numbered: list[BucketStream] = []  # by `BucketStream.number`
        self._index = ConversationIndex(cfg.revision_horizon_s)
        self._last_now = -math.inf
        self._bucket_s = cfg.bucket_s
        self._spans = [cfg.buckets(s) for _, s in cfg.windows]  # buckets per window

    # ------------------------------------------------------------------ feeding

    def _clock(self, now: float) -> float:
        if not math.isfinite(now):
            raise ValueError(f"now must be a finite timestamp, got {now!r}")
        # Time never runs backwards inside the windows (a late caller's `now` is
        # clamped), which keeps buckets and index rows in order and expiry O(1).
        self._last_now = max(self._last_now, now)
        return self._last_now

    def bucket(self, t: float) -> int:
        """The bucket number of time `t`."""
        return math.floor(t / self._bucket_s)

    def _stream(self, key: Key) -> BucketStream:
        st = self._streams.get(key)
        if st is None:
            number = len(self._numbered)
            if number >= _STREAM_LIMIT:
                raise ValueError(f"rolling windows: more than {_STREAM_LIMIT} keys")
            cusum = BernoulliCusum(self.config.cusum_p0, self.config.cusum_p1)
            st = BucketStream(key, number, len(self._spans), cusum)
            self._streams[key] = st
            self._numbered.append(st)
        return st

    def add(
        self,
        key: Key,
        *,
        task: str,
        success: bool | None,
        now: float,
        conversation_id: str | None = None,
        revision: int = 0,
        tag: str = "",
    ) -> AddResult:
        """Record one evaluated conversation. `task` is the reference id (tau-bench's
        task); `success=None` records an outcome that counts in no estimate. `tag` is
        an opaque string kept (and persisted) with the conversation for the revision
        horizon and handed back when a later revision replaces it, so the caller can
        undo its own bookkeeping."""
        if not isinstance(task, str):
            raise TypeError(f"task must be a str (the reference id), got {type(task).__name__}")
        if not -_REVISION_LIMIT <= revision < _REVISION_LIMIT:
            raise ValueError(f"revision must fit in a signed 64-bit int, got {revision}")
        t = self._clock(now)
        result = _ACCEPTED
        fed = 0
        index = self._index
        slot = -1
        hkey = (0, 0)
        if conversation_id is not None:
            index.expire(t)
            hkey = conversation_hash(conversation_id)
            row, slot = index.find(hkey[0], hkey[1], t)
            if row >= 0:
                if revision <= index.revision(row):
                    return _STALE
                result = self._remove(row, t)
                fed = index.fed[row]
                index.alive[row] = 0
        st = self._stream(key)
        self._expire(st, t)  # other keys expire lazily, at their next add or snapshot
        ok = NOT_COUNTED if success is None else int(bool(success))
        task = sys.intern(task)
        if ok != NOT_COUNTED:
            if self._spans:
                st.add(math.floor(t / self._bucket_s), task, ok)
            self._decay_add(st, task, ok, t, 1.0)
            if not fed:
                st.cusum.update(bool(ok))
                fed = 1
        if conversation_id is not None:
            index.put(
                slot,
                hkey,
                t=t,
                revision=revision,
                stream=st.number,
                task=task,
                tag=sys.intern(tag),
                ok=ok,
                fed=fed,
            )
        return result

    def _decay_add(self, st: BucketStream, task: str, ok: int, now: float, weight: float) -> None:
        hl = self.config.decay_half_life_s
        if hl is None:
            return
        st.decay.advance(now, hl)
        st.decay.add(weight, ok)
        d = st.decay_tasks.get(task)
        if d is None:
            d = st.decay_tasks[task] = Decayed(t=now)
        d.advance(now, hl)
        d.add(weight, ok)

    def _remove(self, row: int, now: float) -> AddResult:
        """Take a superseded outcome (index row `row`) out of its bucket, every window
        still holding it and the decayed window."""
        ix = self._index
        held = self._numbered[ix.streams[row]]
        ok = ix.ok[row]
        tag = ix.value(ix.tags[row])
        if ok == NOT_COUNTED:
            return AddResult(True, True, None, held.key, tag)
        task = ix.value(ix.tasks[row])
        t_old = ix.times[row]
        if self._spans:
            held.remove(math.floor(t_old / self._bucket_s), task, ok)
        hl = self.config.decay_half_life_s
        if hl is not None:
            weight = math.exp2(-(now - t_old) / hl)
            self._decay_add(held, task, ok, now, -weight)
        return AddResult(True, True, bool(ok), held.key, tag)

    # ------------------------------------------------------------------ expiry

    def expire(self, now: float) -> None:
        t = self._clock(now)
        self._expire_all(t)
        self._index.expire(t)

    def _expire_all(self, now: float) -> None:
        for st in self._streams.values():
            self._expire(st, now)

    def _expire(self, st: BucketStream, now: float) -> None:
        if self._spans:
            st.expire(math.floor(now / self._bucket_s), self._spans)

    # ------------------------------------------------------------------ reading

    def keys(self) -> list[Key]:
        return list(self._streams)

    def __len__(self) -> int:
        """What the windows hold: conversation-index rows (one per evaluation within
        the revision horizon, superseded ones until dropped) plus bucket cells (one
        per key, bucket and task)."""
        cells = sum(
            len(b) if isinstance(b, dict) else len(b[0])
            for st in self._streams.values()
            for b in st.buckets
        )
        return len(self._index) + cells

    def nbytes(self) -> int:
        """Bytes the windows' own containers allocate (`sys.getsizeof` of the index
        columns and table, the bucket lists, buckets and their cells; the interned task
        and tag strings they share are not counted): what grows with traffic or time."""
        total = self._index.nbytes()
        for st in self._streams.values():
            total += sys.getsizeof(st.numbers) + sys.getsizeof(st.buckets)
            for b in st.buckets:
                if isinstance(b, dict):
                    total += sys.getsizeof(b) + sum(sys.getsizeof(v) for v in b.values())
                else:
                    total += sys.getsizeof(b) + sys.getsizeof(b[0]) + sys.getsizeof(b[1])
        return total

    def conversations(self) -> int:
        """Conversation-index rows held."""
        return len(self._index)

    def cusum(self, key: Key) -> float | None:
        st = self._streams.get(key)
        return None if st is None else st.cusum.value

    def snapshot(self, now: float) -> list[KeySnapshot]:
        """Estimates for every key and window as of `now` (expires first)."""
        t = self._clock(now)
        self._expire_all(t)
        cfg = self.config
        hl = cfg.decay_half_life_s
        rows: list[tuple[Key, str, float, float, list[tuple[float, float]] | None]] = []
        for key, st in self._streams.items():
            for w, (name, _) in enumerate(cfg.windows):
                cnt = st.counts[w]
                tasks = [(float(v[0]), float(v[1])) for v in cnt.tasks.values()]
                rows.append((key, name, float(cnt.n), float(cnt.c), tasks))
            if hl is not None:
                st.decay.advance(t, hl)
                for task in [k for k, d in st.decay_tasks.items() if _stale(d, t, hl)]:
                    del st.decay_tasks[task]
                rows.append((key, cfg.decay_window_name, st.decay.n, st.decay.c, None))
        estimates = self._estimate_rows(rows)
        out: list[KeySnapshot] = []
        per_key = len(cfg.windows) + (1 if hl is not None else 0)
        keys = list(self._streams.items())
        for j, (key, st) in enumerate(keys):
            windows = []
            for r in range(j * per_key, (j + 1) * per_key):
                _, name, n, c, task_counts = rows[r]
                ntasks = len(task_counts) if task_counts is not None else len(st.decay_tasks)
                windows.append(WindowSnapshot(name, n, c, ntasks, estimates[r]))
            out.append(KeySnapshot(key, tuple(windows), st.cusum.value, st.cusum.observations))
        return out

    def estimate_rows(
        self, rows: Sequence[tuple[Key, str, float, float, list[tuple[float, float]] | None]]
    ) -> list[dict[int, WindowEstimate]]:
        """Estimates per row of (key, window name, n, c, per-task (n_i, c_i)) with this
        aggregator's ks, prior, level and `min_conversations` guard: what `snapshot`
        computes, for counts pooled elsewhere (several replicas' stored results)."""
        return self._estimate_rows(rows)

    def _estimate_rows(
        self, rows: Sequence[tuple[Key, str, float, float, list[tuple[float, float]] | None]]
    ) -> list[dict[int, WindowEstimate]]:
        cfg = self.config
        result: list[dict[int, WindowEstimate]] = [{} for _ in rows]
        if not rows:
            return result
        n = np.array([r[2] for r in rows], dtype=np.float64)
        c = np.array([r[3] for r in rows], dtype=np.float64)
        ok_rows = np.flatnonzero(n >= cfg.min_conversations)
        if ok_rows.size == 0:
            return result
        by_k = estimate_many(n[ok_rows], c[ok_rows], cfg.ks, prior=cfg.prior, level=cfg.level)
        for k in cfg.ks:
            arr = by_k[k]
            for j, r in enumerate(ok_rows.tolist()):
                tasks = rows[r][4]
                unb_at: float | None = None
                unb_pow: float | None = None
                used = 0
                if tasks:
                    tasks = sorted(tasks)  # summation order independent of arrival
                    tn = np.fromiter((x[0] for x in tasks), np.float64, len(tasks))
                    tc = np.fromiter((x[1] for x in tasks), np.float64, len(tasks))
                    unb_at, unb_pow, used = tau_bench_means(tn, tc, k)
                result[r][k] = WindowEstimate(
                    k=k,
                    pass_at_k=PassKEstimate(
                        PASS_AT_K,
                        k,
                        float(arr.n[j]),
                        float(arr.c[j]),
                        _f(arr.plugin_at_k[j]),
                        unb_at,
                        _f(arr.mean_at_k[j]),
                        _f(arr.lower_at_k[j]),
                        _f(arr.upper_at_k[j]),
                    ),
                    pass_pow_k=PassKEstimate(
                        PASS_POW_K,
                        k,
                        float(arr.n[j]),
                        float(arr.c[j]),
                        _f(arr.plugin_pow_k[j]),
                        unb_pow,
                        _f(arr.mean_pow_k[j]),
                        _f(arr.lower_pow_k[j]),
                        _f(arr.upper_pow_k[j]),
                    ),
                    tasks_used=used,
                )
        return result

    # ------------------------------------------------------------------ persistence

    def capture(self) -> StateCapture:
        """A point-in-time copy for `StateCapture.to_state()`, cheap enough to take under
        the caller's lock: the buckets' cells (keys x buckets x tasks, not traffic) and
        flat copies of the index columns. The encoding then runs on the capture, outside
        the lock, while `add` keeps changing the aggregator. Buckets no window holds any
        more are dropped first, so equal windows save equal states."""
        if math.isfinite(self._last_now):
            self._expire_all(self._last_now)
        streams = tuple(
            BucketCapture(
                key=key,
                numbers=st.numbers.copy(),
                cells=[[(t, n, c) for t, n, c in bucket_items(b) if n] for b in st.buckets],
                decay=(st.decay.n, st.decay.c, st.decay.t),
                decay_tasks={k: [d.n, d.c, d.t] for k, d in st.decay_tasks.items()},
                cusum=st.cusum.to_state(),
            )
            for key, st in self._streams.items()
        )
        return StateCapture(
            self.config, self._last_now, streams, self._index.capture(self._last_now)
        )

    def to_state(self) -> dict[str, Any]:
        """JSON-able state, `capture().to_state()` in one go (see `StateCapture`)."""
        return self.capture().to_state()

    @classmethod
    def from_state(
        cls, state: Mapping[str, Any], config: RollingConfig | None = None
    ) -> RollingAggregator:
        """Rebuild from `to_state()`: this version's format (3, buckets) or an earlier
        one (1 or 2: one entry per conversation, folded into buckets and the index).
        With `config`, the new configuration wins (windows, bucket size or horizon
        changed across a restart). A malformed state raises ValueError naming the
        stream and field."""
        if not isinstance(state, Mapping):
            raise ValueError(f"rolling state: expected a mapping, got {type(state).__name__}")
        gc_was_enabled = gc.isenabled()
        gc.disable()  # an upgrade builds many short-lived objects
        try:
            return cls._from_state(state, config)
        except (KeyError, TypeError, IndexError, OverflowError) as exc:
            raise ValueError(f"rolling state: malformed ({type(exc).__name__}: {exc})") from exc
        finally:
            if gc_was_enabled:
                gc.enable()

    @classmethod
    def _from_state(
        cls, state: Mapping[str, Any], config: RollingConfig | None
    ) -> RollingAggregator:
        version = state.get("version")
        if version not in (1, 2, 3):
            raise ValueError(f"rolling state: unsupported version {version!r} (expected 1, 2 or 3)")
        saved = RollingConfig.from_dict(state["config"])
        agg = cls(config or saved)
        if state.get("last_now") is not None:
            agg._last_now = float(state["last_now"])
        now = agg._last_now
        current = math.floor(now / agg._bucket_s) if math.isfinite(now) else 0
        keys = [agg._saved_key(s) for s in state["streams"]]
        legacy: list[Columns] = []
        for key, s in zip(keys, state["streams"], strict=True):
            st = agg._stream(key)
            try:
                if version == 3:
                    numbers, buckets = decode_buckets(s)
                    if saved.bucket_s != agg._bucket_s:
                        numbers, buckets = rebucket(numbers, buckets, saved.bucket_s, agg._bucket_s)
                else:
                    legacy.append(decode_columns_v1(s) if version == 1 else decode_columns(s))
                    numbers, buckets = legacy_buckets(legacy[-1], agg._bucket_s)
            except ValueError as exc:
                raise ValueError(f"rolling state: stream {key}: {exc}") from exc
            if agg._spans:
                st.load(numbers, buckets, current, agg._spans)
            cs = s["cusum"]
            st.cusum.value, st.cusum.observations = float(cs["value"]), int(cs["n"])
            dn, dc, dt = s["decay"]
            st.decay = Decayed(float(dn), float(dc), float(dt))
            st.decay_tasks = {
                str(k): Decayed(float(v[0]), float(v[1]), float(v[2]))
                for k, v in s["decay_tasks"].items()
            }
        try:
            if version == 3:
                rows = decode_index(state["index"], len(keys))
            else:
                rows = legacy_index(legacy, now - agg.config.revision_horizon_s)
        except ValueError as exc:
            raise ValueError(f"rolling state: conversation index: {exc}") from exc
        agg._index.load(rows)
        if math.isfinite(now):
            agg.expire(now)
        return agg

    @staticmethod
    def _saved_key(s: Mapping[str, Any]) -> Key:
        key_list = s["key"]
        if not (isinstance(key_list, list) and len(key_list) == 3):
            raise ValueError(f"rolling state: key must be a list of 3 strings, got {key_list!r}")
        return (str(key_list[0]), str(key_list[1]), str(key_list[2]))

    def __iter__(self) -> Iterator[Key]:
        return iter(self._streams)


def _stale(d: Decayed, now: float, half_life: float) -> bool:
    d.advance(now, half_life)
    return d.n < 1e-9


def _f(x: float) -> float | None:
    return None if math.isnan(x) else float(x)
