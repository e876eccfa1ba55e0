"""Bayesian pass@k / pass^k intervals: vectorized exact Beta quantiles vs Monte Carlo.

The baseline is the Monte Carlo path other tools use (Fair Forge's Bayesian mode):
per group, draw posterior samples of p ~ Beta(c+1, n-c+1), push them through p^k and
1-(1-p)^k, take the mean and the 2.5 / 97.5 percentiles. It is measured here, in the
same run, on a subset of the groups and reported per group; tracepass computes the
same quantities exactly for all groups with a few vectorized scipy calls.
Also reported: the published Fair Forge figure (about 1.6 ms per conversation) and the
RollingAggregator's add rate with a million-entry 24 h window.

    .venv/bin/python bench/bench_passk.py [--groups N] [--samples S] [--repeats R]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from tracepass.evaluator.stats.passk import estimate, estimate_many
from tracepass.evaluator.stats.rolling import RollingAggregator, RollingConfig

FAIR_FORGE_MC_S_PER_CONVERSATION = 1.6e-3
KS = (1, 3, 5)


def groups(n_groups: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    n = rng.integers(1, 50, size=n_groups)
    p = rng.beta(8, 2, size=n_groups)
    c = rng.binomial(n, p)
    return n.astype(float), c.astype(float)


def exact_all(n: np.ndarray, c: np.ndarray) -> float:
    t = time.perf_counter()
    estimate_many(n, c, KS, level=0.95)
    return time.perf_counter() - t


def monte_carlo(n: np.ndarray, c: np.ndarray, samples: int, rng: np.random.Generator) -> float:
    t = time.perf_counter()
    for ni, ci in zip(n, c, strict=True):
        p = rng.beta(ci + 1, ni - ci + 1, size=samples)
        for k in KS:
            for values in (p**k, 1 - (1 - p) ** k):
                values.mean()
                np.percentile(values, [2.5, 97.5])
    return time.perf_counter() - t


def scalar_loop(n: np.ndarray, c: np.ndarray) -> float:
    t = time.perf_counter()
    for ni, ci in zip(n, c, strict=True):
        for k in KS:
            estimate(float(ni), float(ci), k)
    return time.perf_counter() - t


def rolling_adds(entries: int) -> tuple[float, float, float]:
    """(adds/s, baseline appends/s, snapshot seconds) with `entries` in the 24h window."""
    agg = RollingAggregator(RollingConfig())
    key = ("agent", "v1", "refs")
    tasks = [f"task{i}" for i in range(200)]
    step = 86_000.0 / entries
    rng = np.random.default_rng(1)
    ok = (rng.random(entries) < 0.9).tolist()
    t0 = time.perf_counter()
    for i in range(entries):
        agg.add(key, task=tasks[i % 200], success=ok[i], now=i * step, conversation_id=f"c{i}")
    adds = entries / (time.perf_counter() - t0)
    base: list[tuple[float, str, bool, str]] = []
    t0 = time.perf_counter()
    for i in range(entries):
        base.append((i * step, tasks[i % 200], ok[i], f"c{i}"))
    baseline = entries / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    agg.snapshot(entries * step)
    return adds, baseline, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--groups", type=int, default=10_000)
    ap.add_argument("--mc-groups", type=int, default=300, help="groups timed for Monte Carlo")
    ap.add_argument("--samples", type=int, default=10_000, help="Monte Carlo draws per group")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--rolling-entries", type=int, default=1_000_000)
    args = ap.parse_args()

    n, c = groups(args.groups)
    # Worst case for tracepass: every group's (n, c) distinct (decayed, fractional
    # counts), so no quantile is shared between groups.
    n_frac = n + np.random.default_rng(3).random(args.groups)
    c_frac = np.minimum(c + 0.5, n_frac)
    rng = np.random.default_rng(2)
    exact_times, distinct_times, mc_times = [], [], []
    for _ in range(args.repeats):
        exact_times.append(exact_all(n, c))
        distinct_times.append(exact_all(n_frac, c_frac))
        mc_times.append(monte_carlo(n[: args.mc_groups], c[: args.mc_groups], args.samples, rng))
    exact_per = statistics.median(exact_times) / args.groups
    distinct_per = statistics.median(distinct_times) / args.groups
    mc_per = statistics.median(mc_times) / args.mc_groups
    scalar_per = scalar_loop(n[:1000], c[:1000]) / 1000
    print(f"groups: {args.groups}, k in {KS}, 95% equal-tailed intervals + posterior means")
    print(
        f"tracepass exact, vectorized:  {exact_per * 1e6:9.3f} µs/group "
        f"({statistics.median(exact_times) * 1e3:.1f} ms for all groups)"
    )
    print(
        f"  all (n, c) distinct:        {distinct_per * 1e6:9.3f} µs/group "
        f"(ratio vs measured Monte Carlo {mc_per / distinct_per:.0f}x, "
        f"vs Fair Forge {FAIR_FORGE_MC_S_PER_CONVERSATION / distinct_per:.0f}x)"
    )
    print(f"tracepass exact, scalar API:  {scalar_per * 1e6:9.3f} µs/group")
    print(f"Monte Carlo ({args.samples} draws):  {mc_per * 1e6:9.3f} µs/group (measured, same run)")
    print(f"ratio vs measured Monte Carlo:      {mc_per / exact_per:9.0f}x")
    print(
        f"ratio vs Fair Forge's ~1.6 ms/conv: {FAIR_FORGE_MC_S_PER_CONVERSATION / exact_per:9.0f}x"
        "  (target >= 1000x)"
    )
    if args.rolling_entries:
        adds, base, snap = rolling_adds(args.rolling_entries)
        print(
            f"rolling: {args.rolling_entries} entries in a 24h window: {adds:,.0f} adds/s "
            f"(bare list append of the same tuples: {base:,.0f}/s, ratio {base / adds:.1f}x); "
            f"snapshot {snap * 1e3:.1f} ms"
        )


if __name__ == "__main__":
    main()
