"""RollingAggregator against a brute-force model of the same windows."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracepass.evaluator.stats.passk import estimate, estimate_tasks
from tracepass.evaluator.stats.rolling import RollingAggregator, RollingConfig

KEY = ("agent", "v1", "refs")


def cfg(**kw: object) -> RollingConfig:
    base: dict[str, object] = {
        "windows": (("short", 10.0), ("long", 100.0)),
        "decay_half_life_s": 20.0,
        "ks": (1, 3),
        "min_conversations": 1,
        "bucket_s": 1.0,  # the edges below are whole seconds: buckets of 1 s change nothing
    }
    base.update(kw)
    return RollingConfig(**base)  # type: ignore[arg-type]


def window(agg: RollingAggregator, now: float, name: str, key: tuple[str, str, str] = KEY):  # type: ignore[no-untyped-def]
    for snap in agg.snapshot(now):
        if snap.key == key:
            return next(w for w in snap.windows if w.window == name)
    raise AssertionError("key missing")


def test_counts_and_expiry_boundary() -> None:
    agg = RollingAggregator(cfg())
    agg.add(KEY, task="a", success=True, now=0.0)
    agg.add(KEY, task="a", success=False, now=5.0)
    w = window(agg, 9.9, "short")
    assert (w.n, w.c) == (2, 1)
    # An entry leaves a window of s seconds when its age reaches s.
    w = window(agg, 10.0, "short")
    assert (w.n, w.c) == (1, 0)
    assert (window(agg, 10.0, "long").n, window(agg, 10.0, "long").c) == (2, 1)
    assert window(agg, 200.0, "long").n == 0


def test_min_sample_guard_gives_no_estimate() -> None:
    agg = RollingAggregator(cfg(min_conversations=5))
    for i in range(4):
        agg.add(KEY, task="a", success=True, now=float(i))
    w = window(agg, 4.0, "long")
    assert w.n == 4
    assert not w.sufficient
    assert w.estimates == {}
    agg.add(KEY, task="a", success=True, now=4.0)
    assert window(agg, 4.0, "long").sufficient


def test_estimates_match_passk_module() -> None:
    agg = RollingAggregator(cfg())
    outcomes = {"a": [1, 1, 1, 0], "b": [1, 0, 0], "c": [1, 1]}
    t = 0.0
    for task, results in outcomes.items():
        for r in results:
            agg.add(KEY, task=task, success=bool(r), now=t)
            t += 0.5
    w = window(agg, t, "long")
    groups = [(len(v), sum(v)) for v in outcomes.values()]
    expected = estimate_tasks(groups, [1, 3])
    for k in (1, 3):
        e = w.estimates[k]
        pooled = expected[k].pooled
        assert e.pass_pow_k.plugin == pytest.approx(pooled.pass_pow_k.plugin)
        assert e.pass_pow_k.mean == pytest.approx(pooled.pass_pow_k.mean)
        assert e.pass_pow_k.lower == pytest.approx(pooled.pass_pow_k.lower)
        assert e.pass_at_k.upper == pytest.approx(pooled.pass_at_k.upper)
        assert e.pass_pow_k.unbiased == pytest.approx(expected[k].mean_unbiased_pow_k)
        assert e.pass_at_k.unbiased == pytest.approx(expected[k].mean_unbiased_at_k)
        assert e.tasks_used == expected[k].tasks_used
    assert w.estimates[3].tasks_used == 2  # task c has only 2 trials


def test_decayed_window_weights() -> None:
    agg = RollingAggregator(cfg())
    agg.add(KEY, task="a", success=True, now=0.0)
    agg.add(KEY, task="a", success=False, now=20.0)
    w = window(agg, 40.0, "fast")
    assert w.n == pytest.approx(0.25 + 0.5)
    assert w.c == pytest.approx(0.25)
    assert not w.sufficient  # effective n 0.75 < min_conversations = 1
    agg.add(KEY, task="b", success=True, now=40.0)
    w = window(agg, 40.0, "fast")
    assert w.n == pytest.approx(1.75)
    assert w.tasks == 2
    e = w.estimates[3]
    assert e.pass_pow_k.unbiased is None  # fractional counts: no unbiased estimator
    assert e.pass_pow_k.plugin == pytest.approx((1.25 / 1.75) ** 3)
    ref = estimate(1.75, 1.25, 3)
    assert e.pass_pow_k.upper == pytest.approx(ref.pass_pow_k.upper)
    assert e.pass_pow_k.mean == pytest.approx(ref.pass_pow_k.mean)


def test_revision_replaces_earlier_outcome() -> None:
    agg = RollingAggregator(cfg())
    r0 = agg.add(
        KEY, task="a", success=False, now=0.0, conversation_id="c1", revision=0, tag="fail"
    )
    assert r0.accepted
    assert not r0.replaced
    r1 = agg.add(KEY, task="a", success=True, now=3.0, conversation_id="c1", revision=1)
    assert r1.replaced
    assert r1.previous_success is False
    assert r1.previous_key == KEY
    assert r1.previous_tag == "fail"
    w = window(agg, 3.0, "short")
    assert (w.n, w.c) == (1, 1)
    fast = window(agg, 3.0, "fast")
    assert fast.n == pytest.approx(1.0)
    assert fast.c == pytest.approx(1.0)
    # Stale or duplicate revisions are ignored.
    assert not agg.add(KEY, task="a", success=False, now=4.0, conversation_id="c1").accepted
    assert window(agg, 4.0, "long").c == 1
    # The CUSUM saw the conversation once (its first outcome, a failure).
    snap = agg.snapshot(4.0)[0]
    assert snap.cusum_observations == 1
    assert snap.cusum == pytest.approx(math.log(0.3 / 0.1))


def test_uncounted_outcome_then_revision() -> None:
    agg = RollingAggregator(cfg())
    agg.add(KEY, task="a", success=None, now=0.0, conversation_id="c", revision=0)
    assert window(agg, 0.0, "long").n == 0
    agg.add(KEY, task="a", success=True, now=1.0, conversation_id="c", revision=1)
    assert (window(agg, 1.0, "long").n, window(agg, 1.0, "long").c) == (1, 1)
    assert agg.snapshot(1.0)[0].cusum_observations == 1


def test_time_is_clamped_monotonic_and_validated() -> None:
    agg = RollingAggregator(cfg())
    agg.add(KEY, task="a", success=True, now=50.0)
    agg.add(KEY, task="a", success=True, now=10.0)  # treated as 50.0
    assert window(agg, 59.0, "short").n == 2
    with pytest.raises(ValueError, match="finite"):
        agg.add(KEY, task="a", success=True, now=math.nan)
    with pytest.raises(TypeError, match="task must be a str"):
        agg.add(KEY, task=None, success=True, now=60.0)  # type: ignore[arg-type]


def test_state_roundtrip_is_json_and_equivalent() -> None:
    agg = RollingAggregator(cfg())
    for i in range(30):
        agg.add(KEY, task=f"t{i % 4}", success=i % 3 != 0, now=i * 2.0, conversation_id=f"c{i}")
    agg.add(KEY, task="t0", success=True, now=61.0, conversation_id="c3", revision=2)
    state = json.loads(json.dumps(agg.to_state()))
    again = RollingAggregator.from_state(state)
    assert again.snapshot(70.0) == agg.snapshot(70.0)
    # A revision after the restart still replaces the persisted outcome.
    a = agg.add(KEY, task="t0", success=False, now=71.0, conversation_id="c3", revision=3)
    b = again.add(KEY, task="t0", success=False, now=71.0, conversation_id="c3", revision=3)
    assert a == b
    assert again.snapshot(72.0) == agg.snapshot(72.0)
    with pytest.raises(ValueError, match="unsupported version"):
        RollingAggregator.from_state({**state, "version": 99})
    with pytest.raises(ValueError, match=r"rolling state: malformed \(KeyError"):
        RollingAggregator.from_state({**state, "streams": [{"key": ["a", "b", "c"]}]})
    with pytest.raises(ValueError, match="key must be a list of 3 strings"):
        RollingAggregator.from_state({**state, "streams": [{"key": ["a"]}]})


def test_jeffreys_prior_and_level_pass_through() -> None:
    agg = RollingAggregator(cfg(prior="jeffreys", level=0.8))
    for i in range(10):
        agg.add(KEY, task="a", success=i < 7, now=0.0)
    e = window(agg, 0.0, "long").estimates[3]
    ref = estimate(10, 7, 3, prior="jeffreys", level=0.8)
    assert e.pass_pow_k.lower == pytest.approx(ref.pass_pow_k.lower)
    assert e.pass_at_k.mean == pytest.approx(ref.pass_at_k.mean)


def test_restart_with_new_windows_rebuilds_counts() -> None:
    agg = RollingAggregator(cfg())
    for i in range(20):
        agg.add(KEY, task="a", success=True, now=float(i * 4))
    new = RollingAggregator.from_state(agg.to_state(), cfg(windows=(("w", 30.0),)))
    assert window(new, 76.0, "w").n == 8  # entries at 48..76 (age < 30)


def test_log_is_compacted() -> None:
    agg = RollingAggregator(cfg(windows=(("w", 100.0),), decay_half_life_s=None))
    for i in range(50_000):
        agg.add(KEY, task="a", success=True, now=float(i))
    assert len(agg) <= 2 * 100 + 1100
    assert window(agg, 49_999.0, "w").n == 100


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="unique"):
        RollingConfig(windows=(("fast", 10.0),))
    with pytest.raises(ValueError, match="seconds must be > 0"):
        RollingConfig(windows=(("w", 0.0),))
    with pytest.raises(ValueError, match="k must be an integer"):
        RollingConfig(ks=(0,))
    with pytest.raises(ValueError, match="at least one window"):
        RollingConfig(windows=(), decay_half_life_s=None)
    with pytest.raises(ValueError, match="p1 must be < p0"):
        RollingConfig(cusum_p0=0.5, cusum_p1=0.6)


events = st.lists(
    st.tuples(
        st.floats(0, 8),  # time step
        st.sampled_from(["a", "b", "c"]),
        st.sampled_from([True, False, None]),
        st.integers(0, 6),  # conversation id
        st.integers(0, 3),  # revision
    ),
    max_size=60,
)


@given(events, st.floats(0, 30))
@settings(max_examples=150, deadline=None)
def test_matches_brute_force_model(
    evs: list[tuple[float, str, bool | None, int, int]], tail: float
) -> None:
    agg = RollingAggregator(cfg())
    latest: dict[str, tuple[int, float, str, bool | None]] = {}
    anon: list[tuple[float, str, bool | None]] = []
    now = 0.0
    for step, task, ok, conv, rev in evs:
        now += step
        cid = None if conv == 0 else f"c{conv}"
        res = agg.add(KEY, task=task, success=ok, now=now, conversation_id=cid, revision=rev)
        if cid is None:
            anon.append((now, task, ok))
        elif cid not in latest or rev > latest[cid][0]:
            assert res.accepted
            latest[cid] = (rev, now, task, ok)
        else:
            assert not res.accepted
    now += tail
    entries = anon + [(t, task, ok) for _, t, task, ok in latest.values()]
    snap = agg.snapshot(now)
    if not snap:
        assert not evs
        return
    for w in snap[0].windows:
        if w.window == "fast":
            n = sum(2 ** (-(now - t) / 20.0) for t, _, ok in entries if ok is not None)
            c = sum(2 ** (-(now - t) / 20.0) for t, _, ok in entries if ok)
            assert w.n == pytest.approx(n, abs=1e-9)
            assert w.c == pytest.approx(c, abs=1e-9)
            continue
        seconds = 10.0 if w.window == "short" else 100.0
        # Bucket edges (bucket_s = 1): an entry is in while its bucket is one of the
        # window's last `seconds` buckets, the current one included.
        live = [
            (task, ok)
            for t, task, ok in entries
            if ok is not None and math.floor(t) > math.floor(now) - seconds
        ]
        assert w.n == len(live)
        assert w.c == sum(1 for _, ok in live if ok)
        if w.n:
            per_task: dict[str, list[int]] = {}
            for task, ok in live:
                per_task.setdefault(task, [0, 0])
                per_task[task][0] += 1
                per_task[task][1] += int(bool(ok))
            exp = estimate_tasks([tuple(v) for v in per_task.values()], [3])[3]  # type: ignore[misc]
            got = w.estimates[3].pass_pow_k.unbiased
            if exp.mean_unbiased_pow_k is None:
                assert got is None
            else:
                assert got == pytest.approx(exp.mean_unbiased_pow_k)
