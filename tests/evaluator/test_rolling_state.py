"""RollingAggregator persistence: the bucketed state format (version 3), the upgrade
from the per-entry formats of earlier releases (version 2 written by the previous
aggregator, kept as the oracle `_rolling_columns_oracle.py`, and version 1), capture
isolation, and precise errors."""

from __future__ import annotations

import base64
import json
from typing import Any

import numpy as np
import pytest
from _rolling_columns_oracle import RollingAggregator as EntryAggregator
from hypothesis import given, settings
from hypothesis import strategies as st

from tracepass.evaluator.stats.rolling import KeySnapshot, RollingAggregator, RollingConfig

KEY = ("agent", "v1", "refs")
Event = tuple[float, str, bool | None, int, int]


def cfg(**kw: Any) -> RollingConfig:
    base: dict[str, Any] = {
        "windows": (("short", 10.0), ("long", 100.0)),
        "decay_half_life_s": 20.0,
        "ks": (1, 3),
        "min_conversations": 1,
        "bucket_s": 1.0,
    }
    base.update(kw)
    return RollingConfig(**base)


def flat(snaps: list[KeySnapshot]) -> list[Any]:
    """Snapshot as comparable rows; floats compared approximately (a restore may sum
    per-task terms in another order)."""
    rows: list[Any] = []
    for s in sorted(snaps, key=lambda s: s.key):
        rows.append((s.key, s.cusum_observations, pytest.approx(s.cusum)))
        for w in s.windows:
            rows.append((w.window, pytest.approx(w.n), pytest.approx(w.c), w.tasks))
            for k, e in sorted(w.estimates.items()):
                for q in (e.pass_at_k, e.pass_pow_k):
                    values = (q.plugin, q.unbiased, q.mean, q.lower, q.upper)
                    approx = (None if v is None else pytest.approx(v) for v in values)
                    rows.append((k, e.tasks_used, *approx))
    return rows


def feed(agg: RollingAggregator, evs: list[Event], now: float, key_of: Any = None) -> float:
    for step, task, ok, conv, rev in evs:
        now += step
        key = key_of(conv) if key_of else KEY
        cid = None if conv == 0 else f"c{conv}"
        agg.add(key, task=task, success=ok, now=now, conversation_id=cid, revision=rev, tag=task)
    return now


def roundtrip(agg: RollingAggregator, config: RollingConfig | None = None) -> RollingAggregator:
    return RollingAggregator.from_state(json.loads(json.dumps(agg.to_state())), config)


events = st.lists(
    st.tuples(
        st.floats(0, 8),
        st.sampled_from(["a", "b", "c"]),
        st.sampled_from([True, False, None]),
        st.integers(0, 6),
        st.integers(0, 3),
    ),
    max_size=40,
)


@given(events, events)
@settings(max_examples=150, deadline=None)
def test_restored_aggregator_behaves_like_the_original(
    before: list[Event], after: list[Event]
) -> None:
    """Save at any point (tombstones, uncounted entries, expired entries), restore, feed
    both the same further events: same AddResults (revisions still supersede, stale ones
    are still refused, the tag comes back), same windows and CUSUM."""
    agg = RollingAggregator(cfg())
    now = feed(agg, before, 0.0, key_of=lambda c: (KEY[0], f"v{c % 2}", KEY[2]))
    again = roundtrip(agg)
    assert flat(again.snapshot(now)) == flat(agg.snapshot(now))
    for step, task, ok, conv, rev in after:
        now += step
        cid = None if conv == 0 else f"c{conv}"
        key = (KEY[0], f"v{(conv + rev) % 2}", KEY[2])
        a = agg.add(
            key, task=task, success=ok, now=now, conversation_id=cid, revision=rev, tag=task
        )
        b = again.add(
            key, task=task, success=ok, now=now, conversation_id=cid, revision=rev, tag=task
        )
        assert a == b
    assert flat(again.snapshot(now + 1)) == flat(agg.snapshot(now + 1))


def test_uncounted_revision_keeps_the_cusum_fed_flag_across_restarts() -> None:
    agg = RollingAggregator(cfg())
    agg.add(KEY, task="a", success=False, now=0.0, conversation_id="c", revision=0)
    agg.add(KEY, task="a", success=None, now=1.0, conversation_id="c", revision=1)  # judge error
    agg.add(KEY, task="a", success=None, now=2.0, conversation_id="d", revision=0)
    state = agg.to_state()
    assert np.frombuffer(base64.b64decode(state["index"]["fed"]), "u1").tolist() == [1, 0]
    again = RollingAggregator.from_state(json.loads(json.dumps(state)))
    # "c" already fed the CUSUM with its first outcome: a later one must not feed it again;
    # "d" never did, so its first countable outcome does.
    again.add(KEY, task="a", success=True, now=3.0, conversation_id="c", revision=2)
    again.add(KEY, task="a", success=True, now=3.0, conversation_id="d", revision=1)
    assert again.snapshot(3.0)[0].cusum_observations == 2


def test_capture_is_a_point_in_time_copy() -> None:
    agg = RollingAggregator(cfg())
    for i in range(10):
        agg.add(KEY, task="a", success=i % 2 == 0, now=float(i), conversation_id=f"c{i}")
    expected = agg.to_state()
    cap = agg.capture()
    agg.add(KEY, task="b", success=True, now=11.0, conversation_id="c1", revision=1)
    for i in range(200):  # expiry and compaction change the live log in place
        agg.add(("x", "y", "z"), task="a", success=True, now=500.0 + i)
    assert cap.to_state() == expected


def test_bucketed_format_is_compact_and_typed() -> None:
    agg = RollingAggregator(cfg())
    agg.add(KEY, task="a", success=True, now=1.5, conversation_id="é-1", revision=3, tag="t")
    agg.add(KEY, task="b", success=None, now=2.5)
    agg.add(KEY, task="a", success=False, now=2.7)
    state = agg.to_state()
    assert state["version"] == 3
    s = state["streams"][0]
    assert np.frombuffer(base64.b64decode(s["bucket"]), "<i8").tolist() == [1, 2]
    assert np.frombuffer(base64.b64decode(s["cells_per_bucket"]), "<u4").tolist() == [1, 1]
    assert s["task_values"] == ["a"]  # the uncounted entry is in no bucket
    assert np.frombuffer(base64.b64decode(s["n"]), "<i8").tolist() == [1, 1]
    assert np.frombuffer(base64.b64decode(s["c"]), "<i8").tolist() == [1, 0]
    ix = state["index"]  # only conversations with an id, hashed: no id is stored
    assert ix["size"] == 1
    assert np.frombuffer(base64.b64decode(ix["t"]), "<f8").tolist() == [1.5]
    assert np.frombuffer(base64.b64decode(ix["rev"]), "<i8").tolist() == [3]
    assert (ix["task_values"], ix["tag_values"]) == (["a"], ["t"])
    assert "é-1" not in json.dumps(state)


@given(events, events)
@settings(max_examples=150, deadline=None)
def test_version_2_state_upgrades_to_the_buckets_it_would_have_built(
    before: list[Event], after: list[Event]
) -> None:
    """A state the previous (per-entry) aggregator wrote, read by this one, equals this
    one fed the same evaluations: same buckets, windows, index, decayed window and
    CUSUM, and the same answers to further adds (revisions, stale ones, tags)."""
    # `before` spans < 320 s: within the horizon, which is within the longest window (so
    # the version-2 log still holds every conversation the index must).
    config = cfg(windows=(("short", 10.0), ("long", 1000.0)), revision_horizon_s=400.0)
    old, direct = EntryAggregator(config), RollingAggregator(config)
    key_of = lambda c: (KEY[0], f"v{c % 2}", KEY[2])  # noqa: E731
    now = feed(old, before, 0.0, key_of=key_of)  # type: ignore[arg-type]
    feed(direct, before, 0.0, key_of=key_of)
    v2 = json.loads(json.dumps(old.to_state()))
    assert v2["version"] == 2
    upgraded = RollingAggregator.from_state(v2, config)
    assert _canonical(upgraded.to_state()) == _canonical(direct.to_state())
    for step, task, ok, conv, rev in after:
        now += step
        cid = None if conv == 0 else f"c{conv}"
        kw: dict[str, Any] = {"task": task, "success": ok, "now": now, "conversation_id": cid}
        a = direct.add(key_of(conv + rev), revision=rev, tag=task, **kw)
        assert upgraded.add(key_of(conv + rev), revision=rev, tag=task, **kw) == a
    assert upgraded.snapshot(now + 1) == direct.snapshot(now + 1)


def _canonical(state: dict[str, Any]) -> dict[str, Any]:
    """The state with its index as a set of rows (rows of equal time in two keys have
    no order the version-2 log kept)."""
    ix = state["index"]
    cols = [
        np.frombuffer(base64.b64decode(ix[f]), d).tolist()
        for f, d in (
            ("h1", "<u8"),
            ("h2", "<u4"),
            ("t", "<f8"),
            ("rev", "<i8"),
            ("stream", "<u4"),
            ("ok", "i1"),
            ("fed", "u1"),
        )
    ]
    tasks = [ix["task_values"][i] for i in np.frombuffer(base64.b64decode(ix["task"]), "<u4")]
    tags = [ix["tag_values"][i] for i in np.frombuffer(base64.b64decode(ix["tag"]), "<u4")]
    streams = []
    for s in state["streams"]:
        numbers = np.frombuffer(base64.b64decode(s["bucket"]), "<i8").tolist()
        per = np.frombuffer(base64.b64decode(s["cells_per_bucket"]), "<u4").tolist()
        codes = np.frombuffer(base64.b64decode(s["task"]), "<u4").tolist()
        n = np.frombuffer(base64.b64decode(s["n"]), "<i8").tolist()
        c = np.frombuffer(base64.b64decode(s["c"]), "<i8").tolist()
        cells = [(s["task_values"][t], ni, ci) for t, ni, ci in zip(codes, n, c, strict=True)]
        buckets, start = [], 0
        for number, m in zip(numbers, per, strict=True):
            if m:  # a bucket whose every outcome was revised away holds nothing
                buckets.append((number, sorted(cells[start : start + m])))
            start += m
        streams.append((s["key"], buckets, s["decay"], s["decay_tasks"], s["cusum"]))
    return {
        "config": state["config"],
        "last_now": state["last_now"],
        "streams": streams,
        "index": sorted(zip(*cols, tasks, tags, strict=True)),
    }


def test_bucket_size_changed_across_a_restart() -> None:
    agg = RollingAggregator(cfg(windows=(("long", 1000.0),)))
    for i in range(100):
        agg.add(KEY, task="a", success=True, now=float(i))
    again = roundtrip(agg, cfg(windows=(("long", 1000.0),), bucket_s=10.0))
    long = again.snapshot(99.0)[0].windows[0]
    assert (long.n, long.c) == (100, 100)
    assert len(again.to_state()["streams"][0]["cells_per_bucket"]) < len(
        agg.to_state()["streams"][0]["cells_per_bucket"]
    )


def test_version_1_state_still_loads() -> None:
    """A state written before the columnar format (one JSON list per column)."""
    agg = RollingAggregator(cfg())
    agg.add(KEY, task="a", success=True, now=0.0, conversation_id="c1", tag="pass")
    agg.add(KEY, task="b", success=False, now=1.0, conversation_id="c2", tag="fail")
    agg.add(KEY, task="a", success=True, now=2.0)
    agg.add(KEY, task="b", success=None, now=3.0, conversation_id="c3", tag="error")
    v2 = agg.to_state()
    s2 = v2["streams"][0]
    v1 = {
        "version": 1,
        "config": v2["config"],
        "last_now": 3.0,
        "streams": [
            {
                "key": list(KEY),
                "t": [0.0, 1.0, 2.0, 3.0],
                "task": ["a", "b", "a", "b"],
                "ok": [1, 0, 1, -1],
                "conv": ["c1", "c2", None, "c3"],
                "rev": [0, 0, 0, 0],
                "tag": ["pass", "fail", "", "error"],
                "fed": [True, True, False, False],
                "decay": s2["decay"],
                "decay_tasks": s2["decay_tasks"],
                "cusum": s2["cusum"],
            }
        ],
    }
    old = RollingAggregator.from_state(json.loads(json.dumps(v1)))
    assert flat(old.snapshot(4.0)) == flat(agg.snapshot(4.0))
    r = old.add(KEY, task="b", success=True, now=5.0, conversation_id="c2", revision=1)
    assert (r.replaced, r.previous_success, r.previous_tag) == (True, False, "fail")
    assert old.to_state()["version"] == 3


def test_restore_with_shorter_windows_places_cursors_by_time() -> None:
    agg = RollingAggregator(cfg(windows=(("long", 1000.0),)))
    for i in range(100):
        agg.add(KEY, task=f"t{i % 7}", success=i % 3 > 0, now=float(i * 10))
    new = roundtrip(agg, cfg(windows=(("w", 95.0), ("long", 1000.0))))
    short = next(w for w in new.snapshot(990.0)[0].windows if w.window == "w")
    assert short.n == 10  # entries at 900..990 are younger than 95 s at 990
    assert short.c == sum(1 for i in range(90, 100) if i % 3 > 0)


def _v2() -> dict[str, Any]:
    agg = EntryAggregator(cfg())
    agg.add(KEY, task="a", success=True, now=0.0, conversation_id="c1")
    agg.add(KEY, task="b", success=False, now=1.0, conversation_id="c2")
    state: dict[str, Any] = json.loads(json.dumps(agg.to_state()))
    return state


def _b64(values: list[Any], dtype: str) -> str:
    return base64.b64encode(np.asarray(values, dtype=dtype).tobytes()).decode()


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("t", "***", "field 't': invalid base64"),
        ("t", _b64([0.0], "<f8"), r"field 't': 8 bytes, expected 2 <f8 values"),
        ("t", _b64([1.0, 0.0], "<f8"), "field 't': timestamps not in ascending order"),
        ("t", _b64([0.0, float("nan")], "<f8"), "field 't': non-finite timestamp"),
        ("t", 5, "field 't': expected a base64 string, got int"),
        ("ok", _b64([1, 2], "i1"), "field 'ok': values must be -1"),
        ("task", _b64([0, 7], "<u4"), "field 'task': code 7 >= 2 values"),
        ("conv_len", _b64([2, 9], "<i4"), "field 'conv': 4 characters"),
        ("size", -1, "field 'size': expected a count"),
    ],
)
def test_malformed_state_names_stream_and_field(field: str, value: Any, message: str) -> None:
    state = _v2()
    state["streams"][0][field] = value
    with pytest.raises(ValueError, match=message) as info:
        RollingAggregator.from_state(state)
    assert "rolling state" in str(info.value)
    if "malformed" not in message:
        assert "stream ('agent', 'v1', 'refs')" in str(info.value)


def test_unsupported_version_and_missing_fields() -> None:
    state = _v2()
    with pytest.raises(ValueError, match=r"unsupported version 4 \(expected 1, 2 or 3\)"):
        RollingAggregator.from_state({**state, "version": 4})
    del state["streams"][0]["fed_uncounted"]
    with pytest.raises(ValueError, match=r"malformed \(KeyError: 'fed_uncounted'"):
        RollingAggregator.from_state(state)


def _v3() -> dict[str, Any]:
    agg = RollingAggregator(cfg())
    agg.add(KEY, task="a", success=True, now=0.0, conversation_id="c1")
    agg.add(KEY, task="b", success=False, now=1.0, conversation_id="c2")
    state: dict[str, Any] = json.loads(json.dumps(agg.to_state()))
    return state


@pytest.mark.parametrize(
    ("part", "field", "value", "message"),
    [
        ("stream", "bucket", _b64([1, 0], "<i8"), "field 'bucket': bucket numbers not ascending"),
        ("stream", "n", _b64([0, 1], "<i8"), "fields 'n', 'c': need 0 <= c <= n"),
        ("stream", "c", _b64([2, 0], "<i8"), "fields 'n', 'c': need 0 <= c <= n"),
        ("stream", "cells_per_bucket", _b64([1, 2], "<u4"), "sums to 3, not 2"),
        ("stream", "task", _b64([0, 9], "<u4"), "field 'task': code 9 >= 2 values"),
        ("index", "t", _b64([1.0, 0.0], "<f8"), "conversation index: field 't': timestamps not"),
        ("index", "stream", _b64([0, 4], "<u4"), "conversation index: field 'stream': key 4 of 1"),
        ("index", "ok", _b64([1, 3], "i1"), "conversation index: field 'ok'"),
        ("index", "size", "x", "conversation index: field 'size': expected a count"),
    ],
)
def test_malformed_v3_state_names_the_part_and_field(
    part: str, field: str, value: Any, message: str
) -> None:
    state = _v3()
    (state["streams"][0] if part == "stream" else state["index"])[field] = value
    with pytest.raises(ValueError, match=message) as info:
        RollingAggregator.from_state(state)
    assert "rolling state" in str(info.value)


def test_revisions_beyond_32_bits_survive_index_and_restart() -> None:
    """The index stores revisions in 32 bits and the rare larger one on the side."""
    agg = RollingAggregator(cfg())
    big = 1 << 40
    agg.add(KEY, task="a", success=True, now=0.0, conversation_id="c", revision=big)
    assert not agg.add(
        KEY, task="a", success=False, now=1.0, conversation_id="c", revision=5
    ).accepted
    again = roundtrip(agg)
    assert not again.add(
        KEY, task="a", success=False, now=2.0, conversation_id="c", revision=big
    ).accepted
    res = again.add(KEY, task="a", success=False, now=2.0, conversation_id="c", revision=big + 1)
    assert res.replaced
    assert (
        again.add(
            KEY, task="a", success=True, now=3.0, conversation_id="c", revision=-(1 << 50)
        ).accepted
        is False
    )
