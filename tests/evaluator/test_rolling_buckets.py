"""The bucketed windows estimate exactly what the per-entry windows did, under the
bucket-edge definition.

`RollingAggregator` counts outcomes per bucket of `bucket_s` seconds and forgets what a
conversation contributed `revision_horizon_s` after its last evaluation. The per-entry
aggregator it replaced is kept as the oracle (`_rolling_columns_oracle.py`, the code
at f528d52). The definition (docs/statistics.md, "Buckets"): a window of W seconds
holds the buckets j - ceil(W/B) < i <= j, j the current bucket. That is exactly what
the per-entry windows count when every time they see is rounded down to its bucket's
start and W rounded up to whole buckets; the decayed window uses exact times. So the
oracle here is two per-entry aggregators: one for the sliding windows, fed
bucket-start times, one for the decayed window, fed exact times. Random sequences of
adds, revisions within and across keys, stale revisions, late clocks, expiry at and
around bucket edges, snapshots and restarts (the bucketed state, version 3, against
the oracle's own) must give the same add results and identical snapshots (n, c,
tasks, every estimate and interval, CUSUM): compared with ==, not approximately.

A conversation is revisited only within the revision horizon (beyond it the bucketed
windows count a revision as a new conversation by design: tested on its own below).
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import asdict, replace
from typing import Any

from _rolling_columns_oracle import RollingAggregator as EntryAggregator
from hypothesis import given, settings
from hypothesis import strategies as st

from tracepass.evaluator.stats.rolling import RollingAggregator, RollingConfig

KEYS = [("agent", "v1", "refs"), ("agent", "v2", "refs"), ("other", "v1", "")]
TASKS = ["t0", "t1", "t2"]
TAGS = ["", '["pass",{"pass":3}]', '["fail",{"pass":2,"fail":1}]']
B = 2.0  # bucket seconds
H = 12.0  # revision horizon
WINDOWS = (("short", 10.0), ("odd", 7.0), ("long", 30.0))  # "odd": 3.5 buckets -> 4


def _config(decay: bool) -> RollingConfig:
    return RollingConfig(
        windows=WINDOWS,
        decay_half_life_s=5.0 if decay else None,
        ks=(1, 3),
        min_conversations=1,
        bucket_s=B,
        revision_horizon_s=H,
    )


class Trio:
    """The bucketed aggregator and its two-part oracle, fed the same calls."""

    def __init__(self, config: RollingConfig) -> None:
        self.config = config
        self.new = RollingAggregator(config)
        # Sliding windows, W rounded up to whole buckets, fed bucket-start times.
        self.win_config = replace(
            config,
            windows=tuple((n, config.buckets(s) * B) for n, s in config.windows),
            decay_half_life_s=None,
        )
        self.win = EntryAggregator(self.win_config)
        # The decayed window, fed exact times.
        self.dec_config = (
            replace(config, windows=()) if config.decay_half_life_s is not None else None
        )
        self.dec = EntryAggregator(self.dec_config) if self.dec_config else None
        self.now = 0.0
        self.clock = -math.inf  # the aggregators' clamped clock
        self.seen: dict[str, float] = {}  # conversation -> time of its last accepted add
        self.generation: dict[int, int] = {}

    def _q(self, t: float) -> float:
        return math.floor(t / B) * B

    def _id(self, conv: int, t: float) -> str | None:
        if conv == 0:
            return None
        cid = f"c{conv}.{self.generation.get(conv, 0)}"
        if cid in self.seen and t - self.seen[cid] >= H:
            # Revisiting it now would be past the horizon: a new conversation instead.
            self.generation[conv] = self.generation.get(conv, 0) + 1
            cid = f"c{conv}.{self.generation[conv]}"
        return cid

    def add(self, key: int, task: int, ok: bool | None, conv: int, rev: int, tag: int) -> None:
        t = max(self.clock, self.now)
        cid = self._id(conv, t)
        kw: dict[str, Any] = {
            "task": TASKS[task],
            "success": ok,
            "conversation_id": cid,
            "revision": rev,
            "tag": TAGS[tag],
        }
        got = self.new.add(KEYS[key], now=self.now, **kw)
        self.clock = t
        want = self.win.add(KEYS[key], now=self._q(self.now), **kw)
        assert asdict(got) == asdict(want)  # two modules' AddResult classes
        if self.dec is not None:
            assert asdict(self.dec.add(KEYS[key], now=self.now, **kw)) == asdict(want)
        if got.accepted and cid is not None:
            self.seen[cid] = t

    def expire(self) -> None:
        self.new.expire(self.now)
        self.win.expire(self._q(self.now))
        if self.dec is not None:
            self.dec.expire(self.now)
        self.clock = max(self.clock, self.now)

    def snapshot(self) -> None:
        got = [asdict(ks) for ks in self.new.snapshot(self.now)]
        want = [asdict(ks) for ks in self.win.snapshot(self._q(self.now))]
        if self.dec is not None:
            for w, d in zip(want, self.dec.snapshot(self.now), strict=True):
                w["windows"] = (*w["windows"], *asdict(d)["windows"])
        self.clock = max(self.clock, self.now)
        assert got == want

    def restart(self) -> None:
        """The bucketed one from its own state (version 3), the oracle from its own."""
        text = json.dumps(self.new.to_state())
        self.new = RollingAggregator.from_state(json.loads(text), self.config)
        self.win = EntryAggregator.from_state(
            json.loads(json.dumps(self.win.to_state())), self.win_config
        )
        if self.dec is not None:
            self.dec = EntryAggregator.from_state(
                json.loads(json.dumps(self.dec.to_state())), self.dec_config
            )
        assert json.loads(text) == self.new.to_state()  # restore loses nothing

    def finish(self) -> None:
        self.snapshot()
        for key in KEYS:
            assert self.new.cusum(key) == self.win.cusum(key)


add_op = st.tuples(
    st.just("add"),
    st.integers(0, len(KEYS) - 1),
    st.integers(0, len(TASKS) - 1),
    st.sampled_from([True, False, None]),
    st.integers(0, 5),  # conversation (0: none)
    st.integers(0, 3),  # revision
    st.integers(0, len(TAGS) - 1),
)
ops = st.lists(
    st.one_of(
        add_op,
        add_op,
        add_op,
        st.tuples(st.just("tick"), st.floats(-5.0, 6.0)),  # negative: a late clock
        st.tuples(st.just("tick"), st.sampled_from([B, B / 2, B - 1e-9, 1e-9, 0.0])),  # edges
        st.tuples(st.just("edge")),  # to the next bucket edge exactly
        st.tuples(st.just("jump"), st.sampled_from([31.0, 60.0, 250.0])),  # past windows
        st.tuples(st.just("expire")),
        st.tuples(st.just("snapshot")),
        st.tuples(st.just("restart")),
    ),
    max_size=80,
)


def _run(trio: Trio, steps: list[tuple[Any, ...]]) -> None:
    for op in steps:
        match op:
            case ("add", key, task, ok, conv, rev, tag):
                trio.add(key, task, ok, conv, rev, tag)
            case ("tick" | "jump", dt):
                trio.now += dt
            case ("edge",):
                trio.now = (math.floor(trio.now / B) + 1) * B
            case ("expire",):
                trio.expire()
            case ("snapshot",):
                trio.snapshot()
            case ("restart",):
                trio.restart()
    trio.finish()


@given(ops, st.booleans())
@settings(max_examples=400, deadline=None)
def test_buckets_equal_the_per_entry_windows(steps: list[tuple[Any, ...]], decay: bool) -> None:
    _run(Trio(_config(decay)), steps)


@given(st.integers(0, 2**32 - 1), st.booleans())
@settings(max_examples=6, deadline=None)
def test_long_runs_equal_the_per_entry_windows(seed: int, decay: bool) -> None:
    """Thousands of conversations, so the index drops rows in batches and rebuilds its
    table (tombstones, growth) and buckets freeze, leave and are revised in place."""
    rng = random.Random(seed)
    steps: list[tuple[Any, ...]] = []
    for i in range(6000):
        steps.append(
            (
                "add",
                rng.randrange(len(KEYS)),
                rng.randrange(len(TASKS)),
                rng.choice([True, True, False, None]),
                rng.choice([0, rng.randrange(1, 400), i + 1000]),  # none, revisit, new
                rng.randrange(4),
                rng.randrange(len(TAGS)),
            )
        )
        steps.append(("tick", rng.choice([0.0, 0.01, 0.02, 0.5, -0.5])))
        if i % 1500 == 1499:
            steps.append(rng.choice([("snapshot",), ("restart",), ("expire",)]))
    _run(Trio(_config(decay)), steps)


def test_revision_moved_to_another_key_after_its_bucket_left() -> None:
    agg = RollingAggregator(_config(False))
    a, b = KEYS[0], KEYS[1]
    agg.add(a, task="t", success=True, now=0.0, conversation_id="x", revision=0)
    agg.add(b, task="t", success=True, now=5.0, conversation_id="x", revision=1)
    res = agg.add(b, task="t", success=False, now=11.0, conversation_id="x", revision=2)
    assert (res.replaced, res.previous_success, res.previous_key) == (True, True, b)
    long_b = next(
        w for s in agg.snapshot(11.0) if s.key == b for w in s.windows if w.window == "long"
    )
    assert (long_b.n, long_b.c) == (1, 0)


def test_a_revision_past_the_horizon_counts_as_a_new_conversation() -> None:
    """The documented bound: what a conversation contributed is undoable for
    `revision_horizon_s` after its last evaluation, then stays in the buckets."""
    agg = RollingAggregator(_config(False))
    key = KEYS[0]
    agg.add(key, task="t", success=True, now=0.0, conversation_id="x")
    inside = agg.add(key, task="t", success=False, now=H - 0.5, conversation_id="x", revision=1)
    assert inside.replaced
    late = agg.add(key, task="t", success=True, now=2 * H, conversation_id="x", revision=2)
    assert late.accepted
    assert not late.replaced
    long = next(w for w in agg.snapshot(2 * H)[0].windows if w.window == "long")
    assert (long.n, long.c) == (2, 1)  # the revision-1 outcome and the late one


def test_index_memory_is_bounded_by_the_horizon() -> None:
    """Thousands of horizons of traffic: the index holds about one horizon of rows."""
    agg = RollingAggregator(_config(True))
    rate = 50  # per second
    for i in range(int(200 * H * rate)):
        agg.add(
            KEYS[i % 3],
            task=TASKS[i % 3],
            success=i % 4 != 0,
            now=i / rate,
            conversation_id=f"c{i}",
        )
    assert agg.conversations() <= 1.2 * H * rate + 1024
