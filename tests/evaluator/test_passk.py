"""pass@k / pass^k estimators against brute force, closed forms and Monte Carlo."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from tracepass.evaluator.stats.passk import (
    estimate,
    estimate_arrays,
    estimate_tasks,
    plugin_pass_at_k,
    plugin_pass_pow_k,
    posterior_params,
    tau_bench_means,
    unbiased_pass_at_k,
    unbiased_pass_pow_k,
    validate_k,
)


@st.composite
def group(draw: st.DrawFn, max_n: int = 9) -> tuple[int, int, int]:
    n = draw(st.integers(1, max_n))
    c = draw(st.integers(0, n))
    k = draw(st.integers(1, n))
    return n, c, k


@given(group())
@settings(max_examples=200, deadline=None)
def test_unbiased_equals_enumeration_over_all_k_subsets(g: tuple[int, int, int]) -> None:
    n, c, k = g
    trials = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    any_pass = sum(any(trials[i] for i in s) for s in subsets) / len(subsets)
    all_pass = sum(all(trials[i] for i in s) for s in subsets) / len(subsets)
    assert float(unbiased_pass_at_k(n, c, k)) == pytest.approx(any_pass, rel=1e-12, abs=1e-15)
    assert float(unbiased_pass_pow_k(n, c, k)) == pytest.approx(all_pass, rel=1e-12, abs=1e-15)


@given(
    st.integers(1, 10**6).flatmap(
        lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, min(n, 40)))
    )
)
@settings(max_examples=150, deadline=None)
def test_unbiased_exact_for_large_n(g: tuple[int, int, int]) -> None:
    n, c, k = g
    exact_pow = Fraction(math.comb(c, k), math.comb(n, k))
    exact_fail = Fraction(math.comb(n - c, k), math.comb(n, k))
    got_pow = float(unbiased_pass_pow_k(n, c, k))
    got_at = float(unbiased_pass_at_k(n, c, k))
    assert got_pow == pytest.approx(float(exact_pow), rel=1e-11, abs=1e-300)
    assert got_at == pytest.approx(float(1 - exact_fail), rel=1e-11, abs=1e-300)


def test_unbiased_large_k_uses_log_gamma_path() -> None:
    n, c, k = 5000, 4990, 600
    exact = Fraction(math.comb(c, k), math.comb(n, k))
    assert float(unbiased_pass_pow_k(n, c, k)) == pytest.approx(float(exact), rel=1e-9)


def test_published_examples() -> None:
    # AgentEval docs: 7 of 10 trials pass -> pass@3 = 0.99, pass^3 = 0.29.
    e = estimate(10, 7, 3)
    assert e.pass_at_k.unbiased == pytest.approx(1 - 1 / 120)
    assert e.pass_pow_k.unbiased == pytest.approx(35 / 120)
    # Fair Forge paper table: p = 2/3.
    for k, at, pw in [(2, 0.889, 0.444), (3, 0.963, 0.296), (4, 0.988, 0.198), (5, 0.996, 0.132)]:
        e = estimate(3, 2, k)
        assert e.pass_at_k.plugin == pytest.approx(at, abs=5e-4)
        assert e.pass_pow_k.plugin == pytest.approx(pw, abs=5e-4)


@given(
    st.floats(0, 500, allow_nan=False).flatmap(
        lambda n: st.tuples(st.just(n), st.floats(0, n), st.integers(1, 12))
    ),
    st.sampled_from(["uniform", "jeffreys"]),
    st.floats(0.5, 0.99),
)
@settings(max_examples=200, deadline=None)
def test_bounds_are_transformed_beta_quantiles(
    g: tuple[float, float, int], prior: str, level: float
) -> None:
    n, c, k = g
    if n == 0:
        return
    e = estimate(n, c, k, prior=prior, level=level)  # type: ignore[arg-type]
    a, b = (1.0, 1.0) if prior == "uniform" else (0.5, 0.5)
    lo = stats.beta.ppf((1 - level) / 2, c + a, n - c + b)
    hi = stats.beta.ppf((1 + level) / 2, c + a, n - c + b)
    assert e.pass_pow_k.lower == pytest.approx(lo**k, rel=1e-9, abs=1e-300)
    assert e.pass_pow_k.upper == pytest.approx(hi**k, rel=1e-7, abs=1e-300)
    assert e.pass_at_k.lower == pytest.approx(1 - (1 - lo) ** k, rel=1e-7, abs=1e-12)
    assert e.pass_at_k.upper == pytest.approx(1 - (1 - hi) ** k, rel=1e-9, abs=1e-12)
    for q in (e.pass_at_k, e.pass_pow_k):
        assert q.lower is not None
        assert q.upper is not None
        assert q.mean is not None
        # The posterior mean may fall outside a narrow equal-tailed interval (skew).
        assert 0.0 <= q.lower <= q.upper <= 1.0
        assert 0.0 <= q.mean <= 1.0


@given(
    st.floats(0.01, 200).flatmap(lambda n: st.tuples(st.just(n), st.floats(0, n))),
    st.integers(1, 20),
)
@settings(max_examples=200, deadline=None)
def test_posterior_mean_closed_form(g: tuple[float, float], k: int) -> None:
    n, c = g
    e = estimate(n, c, k)
    alpha, beta = c + 1, n - c + 1
    from scipy.special import betaln

    expected_pow = math.exp(betaln(alpha + k, beta) - betaln(alpha, beta))
    expected_at = 1 - math.exp(betaln(alpha, beta + k) - betaln(alpha, beta))
    assert e.pass_pow_k.mean == pytest.approx(expected_pow, rel=1e-9, abs=1e-300)
    assert e.pass_at_k.mean == pytest.approx(expected_at, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize(("n", "c", "k"), [(10, 7, 3), (3, 2, 5), (50, 45, 5), (8, 0, 1)])
def test_monte_carlo_agreement(n: int, c: int, k: int) -> None:
    rng = np.random.default_rng(1234)
    alpha, beta = posterior_params(n, c)
    p = rng.beta(float(alpha), float(beta), size=400_000)
    e = estimate(n, c, k, level=0.9)
    for q, samples in ((e.pass_pow_k, p**k), (e.pass_at_k, 1 - (1 - p) ** k)):
        assert q.mean == pytest.approx(samples.mean(), abs=3e-3)
        assert q.lower == pytest.approx(np.quantile(samples, 0.05), abs=5e-3)
        assert q.upper == pytest.approx(np.quantile(samples, 0.95), abs=5e-3)


@given(st.integers(1, 60), st.integers(1, 8))
@settings(max_examples=100, deadline=None)
def test_monotone_in_successes_and_k(n: int, k: int) -> None:
    cs = np.arange(n + 1)
    arr = estimate_arrays(np.full(n + 1, n), cs, k)
    for name in ("plugin", "mean", "lower", "upper"):
        for m in ("at", "pow"):
            v = getattr(arr, f"{name}_{m}_k")
            assert np.all(np.diff(v) >= -1e-12), (name, m)
    if n >= k + 1:
        a, b = estimate_arrays(n, cs, k), estimate_arrays(n, cs, k + 1)
        assert np.all(b.unbiased_pow_k <= a.unbiased_pow_k + 1e-12)
        assert np.all(b.unbiased_at_k >= a.unbiased_at_k - 1e-12)
        assert np.all(b.mean_pow_k <= a.mean_pow_k + 1e-12)


def test_no_data_is_none_never_zero() -> None:
    e = estimate(0, 0, 3)
    assert not e.has_data
    for q in (e.pass_at_k, e.pass_pow_k):
        assert (q.plugin, q.unbiased, q.mean, q.lower, q.upper) == (None,) * 5
    assert np.isnan(plugin_pass_pow_k(0, 0, 2))
    assert np.isnan(plugin_pass_at_k(0, 0, 2))


def test_unbiased_undefined_below_k_and_for_fractional_counts() -> None:
    e = estimate(2, 2, 3)
    assert e.pass_pow_k.unbiased is None
    assert e.pass_at_k.unbiased is None
    assert e.pass_pow_k.plugin == 1.0
    assert e.pass_pow_k.mean is not None
    f = estimate(12.5, 10.25, 3)
    assert f.pass_pow_k.unbiased is None
    assert f.pass_pow_k.plugin == pytest.approx((10.25 / 12.5) ** 3)
    assert f.pass_pow_k.lower is not None


def test_extremes() -> None:
    all_pass = estimate(20, 20, 5)
    assert all_pass.pass_pow_k.plugin == 1.0
    assert all_pass.pass_pow_k.unbiased == 1.0
    assert all_pass.pass_pow_k.upper == pytest.approx(stats.beta.ppf(0.975, 21, 1) ** 5)
    assert all_pass.pass_pow_k.lower is not None
    assert all_pass.pass_pow_k.lower < 1.0
    none_pass = estimate(20, 0, 5)
    assert none_pass.pass_at_k.plugin == 0.0
    assert none_pass.pass_at_k.unbiased == 0.0
    lo = stats.beta.ppf(0.025, 1, 21)
    assert none_pass.pass_at_k.lower == pytest.approx(1 - (1 - lo) ** 5)
    # Tiny pass@k keeps relative precision (no 1 - (1 - tiny) cancellation).
    tiny = estimate(10**6, 1, 1)
    assert tiny.pass_at_k.unbiased == pytest.approx(1e-6, rel=1e-12)


def test_wilson_option() -> None:
    e = estimate(40, 30, 3, method="wilson", level=0.95)
    z = stats.norm.ppf(0.975)
    p, n = 0.75, 40
    center = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    assert e.pass_pow_k.lower == pytest.approx((center - half) ** 3)
    assert e.pass_pow_k.upper == pytest.approx((center + half) ** 3)
    assert e.pass_pow_k.mean == e.pass_pow_k.plugin
    assert e.method == "wilson"


@pytest.mark.parametrize("bad", [0, -1, 2.0, True, "3", None])
def test_k_validated(bad: object) -> None:
    with pytest.raises(ValueError, match="k must be an integer >= 1"):
        validate_k(bad)
    with pytest.raises(ValueError, match="k must be an integer"):
        estimate(10, 5, bad)  # type: ignore[arg-type]


def test_bad_inputs_precise_errors() -> None:
    with pytest.raises(ValueError, match=r"successes exceed trials \(c=5.0 > n=3.0\)"):
        estimate(3, 5, 1)
    with pytest.raises(ValueError, match="counts must be >= 0"):
        estimate(-1, 0, 1)
    with pytest.raises(ValueError, match="finite"):
        estimate(float("nan"), 0, 1)
    with pytest.raises(ValueError, match="level"):
        estimate(3, 1, 1, level=1.0)
    with pytest.raises(ValueError, match="prior"):
        estimate(3, 1, 1, prior="flat")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="method"):
        estimate(3, 1, 1, method="mc")  # type: ignore[arg-type]


def test_custom_prior() -> None:
    e = estimate(10, 5, 1, prior=(2.0, 3.0))
    assert e.pass_pow_k.mean == pytest.approx(7 / 15)


def test_estimate_tasks_tau_bench_and_pooled() -> None:
    groups = [(4, 4), (4, 2), (4, 0), (2, 2)]
    out = estimate_tasks(groups, [1, 3])
    k3 = out[3]
    assert k3.tasks == 4
    assert k3.tasks_used == 3
    expected_pow = (1.0 + math.comb(2, 3) / 4 + 0.0) / 3
    expected_at = (1.0 + (1 - math.comb(2, 3) / 4) + 0.0) / 3
    assert k3.mean_unbiased_pow_k == pytest.approx(expected_pow)
    assert k3.mean_unbiased_at_k == pytest.approx(expected_at)
    assert k3.pooled.n == 14
    assert k3.pooled.c == 8
    assert k3.pooled.pass_pow_k.plugin == pytest.approx((8 / 14) ** 3)
    assert out[1].mean_unbiased_pow_k == pytest.approx((1 + 0.5 + 0 + 1) / 4)
    empty = estimate_tasks([], [1])[1]
    assert empty.mean_unbiased_pow_k is None
    assert empty.pooled.pass_pow_k.mean is None
    assert tau_bench_means([4, 4], [4, 2], 3)[2] == 2
    assert tau_bench_means([1], [1], 3) == (None, None, 0)


def test_vectorized_matches_scalar() -> None:
    rng = np.random.default_rng(7)
    n = rng.integers(0, 60, size=300)
    c = (rng.random(300) * (n + 1)).astype(int).clip(0, n)
    arr = estimate_arrays(n, c, 3)
    for i in range(0, 300, 37):
        e = estimate(int(n[i]), int(c[i]), 3)
        got = arr.upper_pow_k[i]
        assert (e.pass_pow_k.upper is None and np.isnan(got)) or e.pass_pow_k.upper == got
