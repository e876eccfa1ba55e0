"""RollingAggregator persistence: the columnar state format (version 2), version 1
states written by earlier releases, capture isolation, and precise errors."""

from __future__ import annotations

import base64
import json
from typing import Any

import numpy as np
import pytest
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
    assert state["streams"][0]["fed_uncounted"] == [0]  # "c" (its tombstone is not kept)
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


def test_columnar_format_is_compact_and_typed() -> None:
    agg = RollingAggregator(cfg())
    agg.add(KEY, task="a", success=True, now=1.5, conversation_id="é-1", revision=3, tag="t")
    agg.add(KEY, task="b", success=None, now=2.5)
    s = agg.to_state()["streams"][0]
    assert s["size"] == 2
    assert np.frombuffer(base64.b64decode(s["t"]), "<f8").tolist() == [1.5, 2.5]
    assert np.frombuffer(base64.b64decode(s["ok"]), "i1").tolist() == [1, -1]
    assert np.frombuffer(base64.b64decode(s["rev"]), "<i8").tolist() == [3, 0]
    assert s["task_values"] == ["a", "b"]
    assert s["tag_values"] == ["t", ""]
    assert np.frombuffer(base64.b64decode(s["conv_len"]), "<i4").tolist() == [3, -1]
    assert s["conv"] == "é-1"


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
    assert old.to_state()["version"] == 2


def test_restore_with_shorter_windows_places_cursors_by_time() -> None:
    agg = RollingAggregator(cfg(windows=(("long", 1000.0),)))
    for i in range(100):
        agg.add(KEY, task=f"t{i % 7}", success=i % 3 > 0, now=float(i * 10))
    new = roundtrip(agg, cfg(windows=(("w", 95.0), ("long", 1000.0))))
    short = next(w for w in new.snapshot(990.0)[0].windows if w.window == "w")
    assert short.n == 10  # entries at 900..990 are younger than 95 s at 990
    assert short.c == sum(1 for i in range(90, 100) if i % 3 > 0)


def _v2() -> dict[str, Any]:
    agg = RollingAggregator(cfg())
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
    with pytest.raises(ValueError, match=r"unsupported version 3 \(expected 1 or 2\)"):
        RollingAggregator.from_state({**state, "version": 3})
    del state["streams"][0]["fed_uncounted"]
    with pytest.raises(ValueError, match=r"malformed \(KeyError: 'fed_uncounted'"):
        RollingAggregator.from_state(state)
