"""TEST ORACLE, not product code: `evaluator/stats/rolling.py` as it was at f528d52
(one log entry per evaluated conversation, in flat columns, kept for the longest window),
so `test_rolling_buckets.py` can check that the bucketed windows estimate exactly what
the per-entry ones did under the bucket-edge definition (docs/statistics.md,
"Buckets"). Two changes, marked "ORACLE CHANGE": it imports its persisted form from
`_rolling_columns_oracle_state.py` (the version-2 encoder, which the product only
reads now), and `_estimate_rows` sums the per-task terms in sorted order (the bucketed
windows do too), so the tau-bench mean does not depend on a dict's insertion order.

Rolling pass@k / pass^k over sliding time windows, a decayed window and a CUSUM.

The collector feeds every evaluated conversation here; the exporter reads snapshots.
This module is pure (no clock, no I/O): every call takes `now`, so tests are exact and
the collector decides what time means (evaluation time).

Design, and why:

* One append-only log per key (agent_name, agent_version, reference_set) holds the
  outcomes; each sliding window is just a cursor into that log plus running counts
  (total and per reference/task), so `add` and expiry are amortized O(number of
  windows) regardless of window size — a 24 h window with a million entries costs the
  same per conversation as an empty one. The log is compacted once the oldest cursor
  has moved past half of it.
* Per-task counts let the tau-bench estimator (mean over tasks of C(c,k)/C(n,k)) be
  computed per window; pooled plug-in and Bayesian values use the window's totals.
* The decayed ("fast") window weighs an outcome 2^(-age/half_life); counts are
  fractional, so only the plug-in and Bayesian estimators exist there (the unbiased
  estimators need integer counts).
* Memory: a 24 h window at 150 conversations/s holds 13 million entries, so an entry
  is a row of flat columns (times in an `array('d')`, outcome and liveness in byte
  arrays, revisions in an `array('q')`, the interned task and tag and the conversation
  id in lists) and the conversation -> entry index maps each id to one int (its
  stream, position and CUSUM flag packed together): ≈ 110 bytes per entry besides the
  id itself, and no object the garbage collector tracks per entry.
* Revisions: a later revision of the same conversation replaces the earlier outcome in
  every window still holding it (the old entry is tombstoned and its counts removed)
  and is appended at `now`. Stale revisions (<= the one held) are ignored.
* Outcome `None` (e.g. the judge failed) is not evidence about the agent: the entry is
  recorded (so revisions still supersede it) but counted in no n or c.
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
from array import array
from bisect import bisect_right
from collections import Counter as Tally
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import compress, count, repeat
from operator import eq, is_not
from typing import Any, cast

import numpy as np
from _rolling_columns_oracle_state import (  # ORACLE CHANGE
    NOT_COUNTED,
    STATE_VERSION,
    Columns,
    Key,
    StateCapture,
    StreamCapture,
    decode_columns,
    decode_columns_v1,
)

from tracepass.evaluator.stats._rolling_config import RollingConfig
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

# --------------------------------------------------------------------------- internals


@dataclass(slots=True)
class _Counts:
    n: int = 0
    c: int = 0
    tasks: dict[str, list[int]] = field(default_factory=dict)

    def add(self, task: str, ok: int, sign: int) -> None:
        self.n += sign
        self.c += sign * ok
        tc = self.tasks.get(task)
        if tc is None:
            tc = self.tasks[task] = [0, 0]
        tc[0] += sign
        tc[1] += sign * ok
        if tc[0] <= 0:
            del self.tasks[task]


@dataclass(slots=True)
class _Decayed:
    """Exponentially decayed counts, stored as of time `t` (decayed lazily)."""

    n: float = 0.0
    c: float = 0.0
    t: float = 0.0

    def advance(self, now: float, half_life: float) -> None:
        if now > self.t:
            f = math.exp2(-(now - self.t) / half_life)
            self.n *= f
            self.c *= f
            self.t = now

    def add(self, weight: float, ok: int) -> None:
        self.n = max(0.0, self.n + weight)
        self.c = min(self.n, max(0.0, self.c + weight * ok))


# Where a conversation's live entry is, as one int (`RollingAggregator._convs`' value):
# bit 0 = the conversation already fed the CUSUM, bits 1-32 = its stream's number,
# above = the entry's absolute position in that stream's log. A named tuple per entry
# cost ≈ 110 bytes more and one object the garbage collector tracks.
_FED = 1
_STREAM_BITS = 32
_STREAM_MASK = (1 << _STREAM_BITS) - 1
_REVISION_LIMIT = 1 << 63  # revisions are stored as signed 64-bit ints


def _place(position: int, number: int) -> int:
    """An entry's place (stream number and absolute position) as one int: a reference
    without its CUSUM flag (`ref >> 1`)."""
    return (position << _STREAM_BITS) | number


class _Stream:
    """Log + window cursors + counts for one key. The log is columns of flat arrays
    (see the module docstring); `number` identifies the stream in conversation refs."""

    __slots__ = (
        "alive",
        "base",
        "convs",
        "counts",
        "cursors",
        "cusum",
        "decay",
        "decay_tasks",
        "keep",
        "key",
        "number",
        "ok",
        "revs",
        "tags",
        "tasks",
        "times",
    )

    def __init__(self, key: Key, number: int, n_windows: int, cusum: BernoulliCusum) -> None:
        self.key = key
        self.number = number
        self.times = array("d")
        self.tasks: list[str] = []
        self.ok = array("b")  # 1 pass, 0 fail, NOT_COUNTED
        self.alive = bytearray()  # 0 once a revision superseded the entry
        self.convs: list[str | None] = []
        self.revs = array("q")
        self.tags: list[str] = []
        self.base = 0
        self.keep = 0  # absolute index of the first entry still retained
        self.cursors = [0] * n_windows
        self.counts = [_Counts() for _ in range(n_windows)]
        self.decay = _Decayed()
        self.decay_tasks: dict[str, _Decayed] = {}
        self.cusum = cusum

    @property
    def end(self) -> int:
        return self.base + len(self.times)


class RollingAggregator:
    """Windows of conversation outcomes per key; see the module docstring."""

    def __init__(self, config: RollingConfig | None = None) -> None:
        self.config = config or RollingConfig()
        self._streams: dict[Key, _Stream] = {}
        self._numbered: list[_Stream] = []  # by `_Stream.number`
        self._convs: dict[str, int] = {}  # conversation id -> ref (see `_place`)
        self._last_now = -math.inf
        self._longest = max((s for _, s in self.config.windows), default=0.0)
        # The log must also hold entries the decayed window could still need to revise.
        if self.config.decay_half_life_s is not None:
            self._longest = max(self._longest, 40 * self.config.decay_half_life_s)

    # ------------------------------------------------------------------ feeding

    def _clock(self, now: float) -> float:
        if not math.isfinite(now):
            raise ValueError(f"now must be a finite timestamp, got {now!r}")
        # Time never runs backwards inside the windows (a late caller's `now` is
        # clamped), which keeps each log sorted and expiry O(1).
        self._last_now = max(self._last_now, now)
        return self._last_now

    def _stream(self, key: Key) -> _Stream:
        st = self._streams.get(key)
        if st is None:
            number = len(self._numbered)
            if number > _STREAM_MASK:
                raise ValueError(f"rolling windows: more than {_STREAM_MASK} keys")
            cusum = BernoulliCusum(self.config.cusum_p0, self.config.cusum_p1)
            st = _Stream(key, number, len(self.config.windows), cusum)
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
        an opaque string kept (and persisted) with the entry and handed back when a
        later revision replaces it, so the caller can undo its own bookkeeping."""
        if not isinstance(task, str):
            raise TypeError(f"task must be a str (the reference id), got {type(task).__name__}")
        if not -_REVISION_LIMIT <= revision < _REVISION_LIMIT:
            raise ValueError(f"revision must fit in a signed 64-bit int, got {revision}")
        t = self._clock(now)
        replaced = False
        previous: bool | None = None
        previous_key: Key | None = None
        previous_tag = ""
        fed = 0
        if conversation_id is not None:
            ref = self._convs.get(conversation_id)
            if ref is not None:
                held = self._numbered[(ref >> 1) & _STREAM_MASK]
                position = ref >> (_STREAM_BITS + 1)
                if revision <= held.revs[position - held.base]:
                    return _STALE
                previous, previous_tag = self._remove(held, position, t)
                previous_key = held.key
                replaced = True
                fed = ref & _FED
        st = self._stream(key)
        self._expire(st, t)  # other keys expire lazily, at their next add or snapshot
        ok = NOT_COUNTED if success is None else int(bool(success))
        task = sys.intern(task)
        tag = sys.intern(tag)  # a handful of distinct tags shared by a million entries
        idx = st.end
        st.times.append(t)
        st.tasks.append(task)
        st.ok.append(ok)
        st.alive.append(1)
        st.convs.append(conversation_id)
        st.revs.append(revision)
        st.tags.append(tag)
        if ok != NOT_COUNTED:
            for counts in st.counts:
                counts.add(task, ok, +1)
            self._decay_add(st, task, ok, t, 1.0)
            if not fed:
                st.cusum.update(bool(ok))
                fed = _FED
        if conversation_id is not None:
            # `_place(idx, st.number) << 1 | fed`, inlined: this runs per evaluation.
            self._convs[conversation_id] = (((idx << _STREAM_BITS) | st.number) << 1) | fed
        if not replaced:
            return _ACCEPTED
        return AddResult(
            accepted=True,
            replaced=replaced,
            previous_success=previous,
            previous_key=previous_key,
            previous_tag=previous_tag,
        )

    def _decay_add(self, st: _Stream, task: str, ok: int, now: float, weight: float) -> None:
        hl = self.config.decay_half_life_s
        if hl is None:
            return
        st.decay.advance(now, hl)
        st.decay.add(weight, ok)
        d = st.decay_tasks.get(task)
        if d is None:
            d = st.decay_tasks[task] = _Decayed(t=now)
        d.advance(now, hl)
        d.add(weight, ok)

    def _remove(self, st: _Stream, position: int, now: float) -> tuple[bool | None, str]:
        """Take a superseded outcome (at absolute `position` of `st`) out of every window
        still holding it."""
        i = position - st.base
        if not st.alive[i]:
            return None, ""
        st.alive[i] = 0
        ok = st.ok[i]
        if ok == NOT_COUNTED:
            return None, st.tags[i]
        for w, counts in enumerate(st.counts):
            if st.cursors[w] <= position:
                counts.add(st.tasks[i], ok, -1)
        hl = self.config.decay_half_life_s
        if hl is not None:
            weight = math.exp2(-(now - st.times[i]) / hl)
            self._decay_add(st, st.tasks[i], ok, now, -weight)
        return bool(ok), st.tags[i]

    # ------------------------------------------------------------------ expiry

    def expire(self, now: float) -> None:
        self._expire_all(self._clock(now))

    def _expire_all(self, now: float) -> None:
        for st in self._streams.values():
            self._expire(st, now)

    def _expire(self, st: _Stream, now: float) -> None:
        times, base = st.times, st.base
        end = base + len(times)
        for w, (_, seconds) in enumerate(self.config.windows):
            cutoff = now - seconds
            cur = st.cursors[w]
            if cur >= end or times[cur - base] > cutoff:
                continue  # the common case: nothing to expire
            counts = st.counts[w]
            while cur < end and times[cur - base] <= cutoff:
                i = cur - st.base
                if st.alive[i] and st.ok[i] != NOT_COUNTED:
                    counts.add(st.tasks[i], st.ok[i], -1)
                cur += 1
            st.cursors[w] = cur
        # Drop log entries no window needs and that are older than the retention
        # horizon (kept longer so a revision can still find its decayed contribution).
        cutoff = now - self._longest
        keep = st.keep
        limit = min(st.cursors, default=end)
        while keep < limit and st.times[keep - st.base] <= cutoff:
            keep += 1
        st.keep = keep
        drop = keep - st.base
        if drop and (drop == len(st.times) or (drop > 1024 and drop * 2 >= len(st.times))):
            self._compact(st, drop)

    def _compact(self, st: _Stream, drop: int) -> None:
        convs, number, base = self._convs, st.number, st.base
        for i in range(drop):
            cid = st.convs[i]
            if cid is not None:
                ref = convs.get(cid)
                # Only if the ref is this entry (stream and position): a revision may
                # have moved the conversation to another key's log.
                if ref is not None and ref >> 1 == _place(base + i, number):
                    del convs[cid]
        del st.times[:drop]
        del st.tasks[:drop]
        del st.ok[:drop]
        del st.alive[:drop]
        del st.convs[:drop]
        del st.revs[:drop]
        del st.tags[:drop]
        st.base += drop

    # ------------------------------------------------------------------ reading

    def keys(self) -> list[Key]:
        return list(self._streams)

    def __len__(self) -> int:
        """Entries held in logs (alive or superseded)."""
        return sum(len(st.times) for st in self._streams.values())

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
                    tasks = sorted(tasks)  # ORACLE CHANGE
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
        the caller's lock: flat list copies and one dict copy (tens of milliseconds for a
        million entries), no per-entry Python work. The expensive encoding then runs on
        the capture, outside the lock (and off the event loop if the caller wishes)
        while `add` keeps changing the aggregator."""
        streams = tuple(
            StreamCapture(
                key=key,
                fed_uncounted=self._fed_uncounted(st),
                times=st.times[:],
                tasks=st.tasks.copy(),
                ok=st.ok[:],
                alive=st.alive.copy(),
                convs=st.convs.copy(),
                revs=st.revs[:],
                tags=st.tags.copy(),
                decay=(st.decay.n, st.decay.c, st.decay.t),
                decay_tasks={k: [d.n, d.c, d.t] for k, d in st.decay_tasks.items()},
                cusum=st.cusum.to_state(),
            )
            for key, st in self._streams.items()
        )
        return StateCapture(self.config, self._last_now, streams)

    def _fed_uncounted(self, st: _Stream) -> list[int]:
        """Log positions of live uncounted entries whose conversation already fed the
        CUSUM (a counted entry always has). The scan for uncounted entries runs in C;
        they are rare (judge errors, unscored conversations), so the lookups are few."""
        uncounted = compress(count(), map(eq, st.ok, repeat(NOT_COUNTED)))
        out = []
        for i in uncounted:
            c = st.convs[i]
            ref = self._convs.get(c) if c is not None and st.alive[i] else None
            if ref is not None and ref & _FED:
                out.append(i)
        return out

    def to_state(self) -> dict[str, Any]:
        """JSON-able state, `capture().to_state()` in one go (see `StateCapture`)."""
        return self.capture().to_state()

    @classmethod
    def from_state(
        cls, state: Mapping[str, Any], config: RollingConfig | None = None
    ) -> RollingAggregator:
        """Rebuild from `to_state()` (this version's format or version 1's). With
        `config`, the new configuration wins (e.g. windows changed across a restart):
        counts are rebuilt from the saved log. A malformed state raises ValueError
        naming the stream and field."""
        if not isinstance(state, Mapping):
            raise ValueError(f"rolling state: expected a mapping, got {type(state).__name__}")
        # Millions of new objects would trigger repeated full GC passes for nothing.
        gc_was_enabled = gc.isenabled()
        gc.disable()
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
        if version not in (1, STATE_VERSION):
            raise ValueError(
                f"rolling state: unsupported version {version!r} (expected 1 or {STATE_VERSION})"
            )
        decode = decode_columns_v1 if version == 1 else decode_columns
        agg = cls(config or RollingConfig.from_dict(state["config"]))
        if state.get("last_now") is not None:
            agg._last_now = float(state["last_now"])
        for s in state["streams"]:
            key_list = s["key"]
            if not (isinstance(key_list, list) and len(key_list) == 3):
                raise ValueError(
                    f"rolling state: key must be a list of 3 strings, got {key_list!r}"
                )
            key: Key = (str(key_list[0]), str(key_list[1]), str(key_list[2]))
            try:
                cols = decode(s)
            except ValueError as exc:
                raise ValueError(f"rolling state: stream {key}: {exc}") from exc
            agg._load_stream(key, s, cols)
        # Compacts what no window needs any more (e.g. after windows were shortened).
        if math.isfinite(agg._last_now):
            agg._expire_all(agg._last_now)
        return agg

    def _load_stream(self, key: Key, s: Mapping[str, Any], cols: Columns) -> None:
        """Bulk rebuild of one stream (a 24 h log can hold a million entries), with no
        Python-level work per entry: column assignment; each window's cursor found by
        bisection (the log is time-sorted) and its counts tallied, in log order, from
        the entries after it; the conversation index built in C."""
        st = self._stream(key)
        st.cusum = BernoulliCusum(self.config.cusum_p0, self.config.cusum_p1)
        cs = s["cusum"]
        st.cusum.value, st.cusum.observations = float(cs["value"]), int(cs["n"])
        size = len(cols.times)
        st.times, st.tasks, st.ok = cols.times, cols.tasks, cols.ok
        st.alive = bytearray(b"\x01") * size
        st.convs, st.revs, st.tags = cols.convs, cols.revs, cols.tags
        st.base = st.keep = 0
        now = self._last_now
        cursors = [
            bisect_right(st.times, now - seconds) if math.isfinite(now) else 0
            for _, seconds in self.config.windows
        ]
        for w, cur in enumerate(cursors):
            st.cursors[w] = cur
            counts = st.counts[w]
            for (task, ok), m in Tally(zip(st.tasks[cur:], st.ok[cur:], strict=True)).items():
                if ok != NOT_COUNTED:
                    counts.add(task, ok, m)
        # Each entry's ref (`_place` << 1 | fed), computed in numpy: positions from 0.
        places = (np.arange(size, dtype=np.int64) << _STREAM_BITS) | st.number
        refs: list[int] = ((places << 1) | cols.fed.astype(np.int64)).tolist()
        with_conv = compress(zip(st.convs, refs, strict=True), map(is_not, st.convs, repeat(None)))
        self._convs.update(cast("Iterator[tuple[str, int]]", with_conv))
        dn, dc, dt = s["decay"]
        st.decay = _Decayed(float(dn), float(dc), float(dt))
        st.decay_tasks = {
            str(k): _Decayed(float(v[0]), float(v[1]), float(v[2]))
            for k, v in s["decay_tasks"].items()
        }

    def __iter__(self) -> Iterator[Key]:
        return iter(self._streams)


def _stale(d: _Decayed, now: float, half_life: float) -> bool:
    d.advance(now, half_life)
    return d.n < 1e-9


def _f(x: float) -> float | None:
    return None if math.isnan(x) else float(x)
