"""The rolling windows' compact columns change nothing a caller can see.

`RollingAggregator` keeps its log in flat arrays and its conversation index as ints
(≈ 110 bytes per entry instead of ≈ 250). The list-based aggregator it replaced is kept
as a test oracle (`_rolling_lists_oracle.py`, the code at 68c296e); random sequences of
adds, revisions (also across keys), stale revisions, late clocks, expiry, snapshots and
restarts from the persisted state (what journal replay then adds to) must give the same
add results, entry counts, snapshots (n, c, tasks, every estimate and interval, CUSUM)
and the same persisted state, byte for byte.
"""

from __future__ import annotations

import gc
import json
import random
from dataclasses import asdict
from typing import Any

from _rolling_lists_oracle import RollingAggregator as ListsAggregator
from hypothesis import given, settings
from hypothesis import strategies as st

from tracepass.evaluator.stats.rolling import RollingAggregator, RollingConfig

KEYS = [("agent", "v1", "refs"), ("agent", "v2", "refs"), ("other", "v1", "")]
TASKS = ["t0", "t1", "t2"]
TAGS = ["", '["pass",{"pass":3}]', '["fail",{"pass":2,"fail":1}]']


def _config(decay: bool) -> RollingConfig:
    return RollingConfig(
        windows=(("short", 10.0), ("long", 30.0)),
        decay_half_life_s=5.0 if decay else None,
        ks=(1, 3),
        min_conversations=1,
    )


class Pair:
    """The new aggregator and the oracle, fed the same calls, compared after each."""

    def __init__(self, config: RollingConfig) -> None:
        self.config = config
        self.new = RollingAggregator(config)
        self.old = ListsAggregator(config)
        self.now = 0.0

    def add(self, key: int, task: int, ok: bool | None, conv: int, rev: int, tag: int) -> None:
        kw: dict[str, Any] = {
            "task": TASKS[task],
            "success": ok,
            "now": self.now,
            "conversation_id": None if conv == 0 else f"c{conv}",
            "revision": rev,
            "tag": TAGS[tag],
        }
        got, want = self.new.add(KEYS[key], **kw), self.old.add(KEYS[key], **kw)
        assert asdict(got) == asdict(want)  # two modules' AddResult classes
        assert len(self.new) == len(self.old)

    def expire(self) -> None:
        self.new.expire(self.now)
        self.old.expire(self.now)
        assert len(self.new) == len(self.old)

    def snapshot(self) -> None:
        got = [asdict(ks) for ks in self.new.snapshot(self.now)]
        assert got == [asdict(ks) for ks in self.old.snapshot(self.now)]
        assert len(self.new) == len(self.old)

    def restart(self) -> None:
        """Persist and restore both from the NEW aggregator's state (what a restart of
        this version reads), after checking the oracle would have written the same."""
        state = self.new.to_state()
        assert state == self.old.to_state()
        text = json.dumps(state)
        self.new = RollingAggregator.from_state(json.loads(text), self.config)
        self.old = ListsAggregator.from_state(json.loads(text), self.config)
        assert len(self.new) == len(self.old)
        assert self.new.to_state() == self.old.to_state()

    def finish(self) -> None:
        self.snapshot()
        assert self.new.to_state() == self.old.to_state()
        for key in KEYS:
            assert self.new.cusum(key) == self.old.cusum(key)


add_op = st.tuples(
    st.just("add"),
    st.integers(0, len(KEYS) - 1),
    st.integers(0, len(TASKS) - 1),
    st.sampled_from([True, False, None]),
    st.integers(0, 4),  # conversation (0: none)
    st.integers(0, 3),  # revision
    st.integers(0, len(TAGS) - 1),
)
ops = st.lists(
    st.one_of(
        add_op,
        add_op,
        add_op,
        st.tuples(st.just("tick"), st.floats(-5.0, 12.0)),  # negative: a late clock
        st.tuples(st.just("jump"), st.sampled_from([31.0, 60.0, 250.0])),  # past windows
        st.tuples(st.just("expire")),
        st.tuples(st.just("snapshot")),
        st.tuples(st.just("restart")),
    ),
    max_size=80,
)


def _run(pair: Pair, steps: list[tuple[Any, ...]]) -> None:
    for op in steps:
        match op:
            case ("add", key, task, ok, conv, rev, tag):
                pair.add(key, task, ok, conv, rev, tag)
            case ("tick" | "jump", dt):
                pair.now += dt
            case ("expire",):
                pair.expire()
            case ("snapshot",):
                pair.snapshot()
            case ("restart",):
                pair.restart()
    pair.finish()


@given(ops, st.booleans())
@settings(max_examples=300, deadline=None)
def test_columns_equal_the_list_aggregator(steps: list[tuple[Any, ...]], decay: bool) -> None:
    _run(Pair(_config(decay)), steps)


@given(st.integers(0, 2**32 - 1), st.booleans())
@settings(max_examples=6, deadline=None)
def test_long_runs_equal_the_list_aggregator(seed: int, decay: bool) -> None:
    """Thousands of entries per key, so the log is compacted by halves (> 1024 entries
    dropped at once), not only when it empties."""
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
        steps.append(("tick", rng.choice([0.0, 0.01, 0.02, -0.5])))
        if i % 1500 == 1499:
            steps.append(rng.choice([("snapshot",), ("restart",), ("expire",)]))
    _run(Pair(_config(decay)), steps)


def test_revision_moved_to_another_key_survives_compaction() -> None:
    """The defect the equality test found in the list version: once the key the
    conversation left compacted its log, a later revision was counted a second time."""
    agg = RollingAggregator(_config(False))
    a, b = KEYS[0], KEYS[1]
    agg.add(a, task="t", success=True, now=0.0, conversation_id="x", revision=0)
    agg.add(b, task="t", success=True, now=5.0, conversation_id="x", revision=1)
    agg.expire(31.0)  # a's entry is past the longest window: a's log is emptied
    res = agg.add(b, task="t", success=False, now=32.0, conversation_id="x", revision=2)
    assert res.replaced
    assert res.previous_success is True
    assert res.previous_key == b
    long_b = next(
        w for s in agg.snapshot(32.0) if s.key == b for w in s.windows if w.window == "long"
    )
    assert (long_b.n, long_b.c) == (1, 0)


def test_entries_are_no_objects_the_gc_tracks() -> None:
    """A million entries must not be a million objects for every full collection to
    visit: adding entries adds no tracked object."""
    agg = RollingAggregator(_config(True))
    ids = [f"conv-{i}" for i in range(20_000)]
    for i, cid in enumerate(ids[:100]):
        agg.add(KEYS[i % 2], task="t0", success=True, now=float(i), conversation_id=cid)
    gc.collect()
    before = len(gc.get_objects())
    for i, cid in enumerate(ids[100:]):
        agg.add(KEYS[i % 2], task=TASKS[i % 3], success=i % 5 != 0, now=100.0, conversation_id=cid)
    gc.collect()
    assert len(gc.get_objects()) - before < 50
    assert len(agg) == len(ids)
