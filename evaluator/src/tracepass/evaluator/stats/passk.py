"""pass@k and pass^k: plug-in, unbiased, pooled/per-task and Bayesian estimators.

Why several estimators: the plug-in value `1-(1-c/n)^k` (Fair Forge) is what most people
expect but it is biased for small n; the combinatorial estimator `1 - C(n-c,k)/C(n,k)`
(Chen et al. for pass@k; tau-bench for pass^k `C(c,k)/C(n,k)`) is unbiased but defined
only for n >= k and integer counts; and neither says how sure we are. The Bayesian
estimator answers that with a Beta posterior. Because `p -> p^k` and `p -> 1-(1-p)^k`
are both increasing in p, the credible bounds of the transforms are *exactly* the
transformed Beta quantiles of p: no Monte Carlo is needed, and the whole computation is
a handful of vectorized scipy calls, so thousands of groups cost microseconds each.

Everything here works on arrays (`estimate_arrays`) and the scalar helpers wrap it.
"No data" (n == 0) is `None`/NaN, never 0: a quiet period must not look like a failure.
See docs/statistics.md for every formula and edge case.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt
from scipy import special

from tracepass.evaluator.vocabulary import PASS_AT_K, PASS_POW_K, KMetric

__all__ = [
    "Method",
    "PassKArrays",
    "PassKEstimate",
    "PassKPair",
    "PriorSpec",
    "TaskAggregate",
    "estimate",
    "estimate_arrays",
    "estimate_many",
    "estimate_tasks",
    "plugin_pass_at_k",
    "plugin_pass_pow_k",
    "posterior_params",
    "prior_params",
    "tau_bench_means",
    "unbiased_pass_at_k",
    "unbiased_pass_pow_k",
    "validate_k",
]

FloatArray = npt.NDArray[np.float64]
PriorSpec = Literal["uniform", "jeffreys"] | tuple[float, float]
Method = Literal["bayes", "wilson"]

# Up to this k the ratio of binomials / Beta functions is an explicit product of k
# factors (relative error <= k ulp); beyond it log-gamma differences are used, whose
# absolute error grows with log(n!) (~1e-9 relative at n = 1e6), still far below any
# sampling error at such n.
_PRODUCT_MAX_K = 512


def validate_k(k: object) -> int:
    """k must be a plain int >= 1 (bools and floats like 3.0 are refused: they are
    almost always a bug upstream, e.g. a config value parsed with the wrong type)."""
    if isinstance(k, bool) or not isinstance(k, int | np.integer):
        raise ValueError(f"k must be an integer >= 1, got {k!r} ({type(k).__name__})")
    if k < 1:
        raise ValueError(f"k must be an integer >= 1, got {k}")
    return int(k)


def _validate_level(level: float) -> float:
    if not (isinstance(level, int | float) and 0.0 < float(level) < 1.0):
        raise ValueError(f"level must be a probability strictly between 0 and 1, got {level!r}")
    return float(level)


def prior_params(prior: PriorSpec) -> tuple[float, float]:
    """(a, b) of the Beta prior: uniform Beta(1,1), Jeffreys Beta(1/2,1/2), or explicit."""
    if prior == "uniform":
        return 1.0, 1.0
    if prior == "jeffreys":
        return 0.5, 0.5
    if isinstance(prior, tuple) and len(prior) == 2:
        a, b = float(prior[0]), float(prior[1])
        if a > 0 and b > 0 and math.isfinite(a) and math.isfinite(b):
            return a, b
    raise ValueError(
        f"prior must be 'uniform', 'jeffreys' or a pair (a, b) of positive numbers, got {prior!r}"
    )


def _counts(n: npt.ArrayLike, c: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    n_arr = np.asarray(n, dtype=np.float64)
    c_arr = np.asarray(c, dtype=np.float64)
    n_arr, c_arr = np.broadcast_arrays(n_arr, c_arr)
    if not (np.all(np.isfinite(n_arr)) and np.all(np.isfinite(c_arr))):
        raise ValueError("counts must be finite numbers")
    if np.any(n_arr < 0) or np.any(c_arr < 0):
        raise ValueError("counts must be >= 0")
    if np.any(c_arr > n_arr * (1 + 1e-12) + 1e-12):
        bad = int(np.argmax(c_arr > n_arr * (1 + 1e-12) + 1e-12))
        raise ValueError(
            f"successes exceed trials (c={float(c_arr.flat[bad])!r} > n={float(n_arr.flat[bad])!r})"
        )
    # Decayed counts accumulate rounding; never let c creep above n.
    return n_arr.astype(np.float64), np.minimum(c_arr, n_arr).astype(np.float64)


# --------------------------------------------------------------------------- plug-in


def _pow_at(p: FloatArray, k: int) -> FloatArray:
    """1 - (1-p)^k without cancellation for small p."""
    with np.errstate(divide="ignore"):
        out: FloatArray = -np.expm1(k * np.log1p(-p))
    return out


def plugin_pass_at_k(n: npt.ArrayLike, c: npt.ArrayLike, k: int) -> FloatArray:
    """1 - (1 - c/n)^k; NaN where n == 0."""
    k = validate_k(k)
    n_arr, c_arr = _counts(n, c)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.where(n_arr > 0, c_arr / np.where(n_arr > 0, n_arr, 1.0), np.nan)
    return _pow_at(p, k)


def plugin_pass_pow_k(n: npt.ArrayLike, c: npt.ArrayLike, k: int) -> FloatArray:
    """(c/n)^k; NaN where n == 0."""
    k = validate_k(k)
    n_arr, c_arr = _counts(n, c)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.where(n_arr > 0, c_arr / np.where(n_arr > 0, n_arr, 1.0), np.nan)
    out: FloatArray = p**k
    return out


# --------------------------------------------------------------------------- unbiased


def _log_comb_ratio(top: FloatArray, n: FloatArray, k: int) -> FloatArray:
    """log(C(top, k) / C(n, k)) for integer-valued 0 <= top <= n, n >= k; -inf if top < k.

    As a product: prod_{i<k} (top-i)/(n-i) = prod_{i<k} (1 - (n-top)/(n-i)), summed in
    log space so neither tiny ratios (pass^k) nor ratios near 1 (tiny pass@k) lose
    relative precision.
    """
    gap = n - top
    out = np.zeros_like(n)
    if k <= _PRODUCT_MAX_K:
        with np.errstate(divide="ignore", invalid="ignore"):
            for i in range(k):
                # log1p(-x) is exact-ish for small x; log(ratio) for ratio far below 1
                # (log1p(-x) with x near 1 would lose the digits of 1 - x).
                x = gap / (n - i)
                out += np.where(x < 0.5, np.log1p(-x), np.log((top - i) / (n - i)))
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            out = (
                special.gammaln(top + 1)
                - special.gammaln(top - k + 1)
                - special.gammaln(n + 1)
                + special.gammaln(n - k + 1)
            )
    return np.where(top < k, -np.inf, out)


def _unbiased(n: FloatArray, c: FloatArray, k: int) -> tuple[FloatArray, FloatArray]:
    """(pass@k, pass^k); NaN where n < k or counts are not integers."""
    defined = (n >= k) & (n == np.round(n)) & (c == np.round(c))
    n_safe = np.where(defined, n, float(k))
    c_safe = np.where(defined, c, 0.0)
    log_fail = _log_comb_ratio(n_safe - c_safe, n_safe, k)
    log_pow = _log_comb_ratio(c_safe, n_safe, k)
    at_k = -np.expm1(log_fail)
    pow_k = np.exp(log_pow)
    return np.where(defined, at_k, np.nan), np.where(defined, pow_k, np.nan)


def unbiased_pass_at_k(n: npt.ArrayLike, c: npt.ArrayLike, k: int) -> FloatArray:
    """1 - C(n-c,k)/C(n,k): the probability that a k-subset of the n trials holds a pass.
    NaN where n < k or the counts are fractional (decayed)."""
    k = validate_k(k)
    return _unbiased(*_counts(n, c), k)[0]


def unbiased_pass_pow_k(n: npt.ArrayLike, c: npt.ArrayLike, k: int) -> FloatArray:
    """C(c,k)/C(n,k) (tau-bench): the probability that a k-subset holds only passes."""
    k = validate_k(k)
    return _unbiased(*_counts(n, c), k)[1]


# --------------------------------------------------------------------------- Bayesian


def posterior_params(
    n: npt.ArrayLike, c: npt.ArrayLike, prior: PriorSpec = "uniform"
) -> tuple[FloatArray, FloatArray]:
    """Beta(c + a, n - c + b): conjugate update, valid for fractional counts too."""
    a, b = prior_params(prior)
    n_arr, c_arr = _counts(n, c)
    return c_arr + a, (n_arr - c_arr) + b


def _log_beta_ratio(alpha: FloatArray, beta: FloatArray, k: int) -> FloatArray:
    """log(B(alpha + k, beta) / B(alpha, beta)) = log E[p^k] for p ~ Beta(alpha, beta)."""
    if k <= _PRODUCT_MAX_K:
        out = np.zeros_like(alpha)
        total = alpha + beta
        for i in range(k):
            x = beta / (total + i)
            out += np.where(x < 0.5, np.log1p(-x), np.log((alpha + i) / (total + i)))
        return out
    result: FloatArray = special.betaln(alpha + k, beta) - special.betaln(alpha, beta)
    return result


@dataclass(frozen=True, slots=True)
class PassKArrays:
    """Vectorized results; NaN marks "not defined" (no data, n < k, fractional counts)."""

    k: int
    n: FloatArray
    c: FloatArray
    plugin_at_k: FloatArray
    plugin_pow_k: FloatArray
    unbiased_at_k: FloatArray
    unbiased_pow_k: FloatArray
    mean_at_k: FloatArray
    mean_pow_k: FloatArray
    lower_at_k: FloatArray
    upper_at_k: FloatArray
    lower_pow_k: FloatArray
    upper_pow_k: FloatArray


def _wilson(n: FloatArray, c: FloatArray, level: float) -> tuple[FloatArray, FloatArray]:
    z = float(special.ndtri(0.5 + level / 2.0))
    n_safe = np.where(n > 0, n, 1.0)
    p = c / n_safe
    z2 = z * z
    denom = 1.0 + z2 / n_safe
    center = (p + z2 / (2.0 * n_safe)) / denom
    half = (z / denom) * np.sqrt(np.maximum(p * (1.0 - p) / n_safe + z2 / (4.0 * n_safe**2), 0.0))
    return np.clip(center - half, 0.0, 1.0), np.clip(center + half, 0.0, 1.0)


def estimate_arrays(
    n: npt.ArrayLike,
    c: npt.ArrayLike,
    k: int,
    *,
    prior: PriorSpec = "uniform",
    level: float = 0.95,
    method: Method = "bayes",
) -> PassKArrays:
    """All estimators for many groups at once (one array element per group).

    `method="bayes"`: mean = posterior mean of the transform, bounds = transformed
    equal-tailed Beta quantiles. `method="wilson"`: mean = plug-in value, bounds =
    transformed Wilson score interval for p (frequentist; n may be fractional and then
    acts as an effective sample size).
    """
    return estimate_many(n, c, (k,), prior=prior, level=level, method=method)[validate_k(k)]


def estimate_many(
    n: npt.ArrayLike,
    c: npt.ArrayLike,
    ks: Sequence[int],
    *,
    prior: PriorSpec = "uniform",
    level: float = 0.95,
    method: Method = "bayes",
) -> dict[int, PassKArrays]:
    """`estimate_arrays` for several k at once. The Beta quantiles — the only costly
    part — do not depend on k, so they are computed once per distinct (n, c) pair:
    groups sharing counts (common with integer trials per task) cost nothing extra."""
    ks_valid = [validate_k(k) for k in ks]
    level = _validate_level(level)
    if method not in ("bayes", "wilson"):
        raise ValueError(f"method must be 'bayes' or 'wilson', got {method!r}")
    a, b = prior_params(prior)
    n_arr, c_arr = _counts(n, c)
    shape = n_arr.shape
    flat_n, flat_c = n_arr.ravel(), c_arr.ravel()
    inverse: npt.NDArray[np.intp] | None = None
    if flat_n.size > 64:
        keys, first, inv = np.unique(flat_n + 1j * flat_c, return_index=True, return_inverse=True)
        if keys.size < 0.8 * flat_n.size:
            inverse = inv.reshape(-1)
            flat_n, flat_c = flat_n[first], flat_c[first]
    empty = flat_n <= 0
    if method == "bayes":
        alpha, beta = flat_c + a, (flat_n - flat_c) + b
        tail = (1.0 - level) / 2.0
        p_lo = np.asarray(special.betaincinv(alpha, beta, tail), dtype=np.float64)
        p_hi = np.asarray(special.betainccinv(alpha, beta, tail), dtype=np.float64)
    else:
        p_lo, p_hi = _wilson(flat_n, flat_c, level)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.where(empty, np.nan, flat_c / np.where(empty, 1.0, flat_n))

    def out(x: npt.ArrayLike) -> FloatArray:
        v = np.where(empty, np.nan, np.asarray(x, dtype=np.float64))
        if inverse is not None:
            v = v[inverse]
        return v.reshape(shape)

    result: dict[int, PassKArrays] = {}
    for k in ks_valid:
        plugin_at = _pow_at(p, k)
        plugin_pow = p**k
        unb_at, unb_pow = _unbiased(flat_n, flat_c, k)
        if method == "bayes":
            mean_pow = np.exp(_log_beta_ratio(alpha, beta, k))
            # E[1-(1-p)^k] = 1 - E[q^k] with q = 1-p ~ Beta(beta, alpha).
            mean_at = -np.expm1(_log_beta_ratio(beta, alpha, k))
        else:
            mean_at, mean_pow = plugin_at, plugin_pow
        result[k] = PassKArrays(
            k=k,
            n=n_arr,
            c=c_arr,
            plugin_at_k=out(plugin_at),
            plugin_pow_k=out(plugin_pow),
            unbiased_at_k=out(unb_at),
            unbiased_pow_k=out(unb_pow),
            mean_at_k=out(mean_at),
            mean_pow_k=out(mean_pow),
            lower_at_k=out(_pow_at(p_lo, k)),
            upper_at_k=out(_pow_at(p_hi, k)),
            lower_pow_k=out(p_lo**k),
            upper_pow_k=out(p_hi**k),
        )
    return result


# --------------------------------------------------------------------------- scalar API


@dataclass(frozen=True, slots=True)
class PassKEstimate:
    """One quantity (pass@k or pass^k) for one group: the one estimate type, used by
    `estimate`, the rolling windows and offline runs alike. `None` = not defined: `plugin`,
    `mean`, `lower`, `upper` when n == 0; `unbiased` also when n < k or counts are
    fractional. `mean` is the posterior mean (bayes) or the plug-in value (wilson)."""

    metric: KMetric
    k: int
    n: float
    c: float
    plugin: float | None
    unbiased: float | None
    mean: float | None
    lower: float | None
    upper: float | None


@dataclass(frozen=True, slots=True)
class PassKPair:
    k: int
    n: float
    c: float
    method: Method
    level: float
    pass_at_k: PassKEstimate
    pass_pow_k: PassKEstimate

    @property
    def has_data(self) -> bool:
        return self.n > 0


def estimate(
    n: float,
    c: float,
    k: int,
    *,
    prior: PriorSpec = "uniform",
    level: float = 0.95,
    method: Method = "bayes",
) -> PassKPair:
    """pass@k and pass^k of one group of n trials with c successes.

    A scalar path (plain floats, one scipy call per bound) with the same formulas as
    `estimate_arrays`: numpy's per-call overhead would dominate a single group.
    """
    k = validate_k(k)
    level = _validate_level(level)
    if method not in ("bayes", "wilson"):
        raise ValueError(f"method must be 'bayes' or 'wilson', got {method!r}")
    a, b = prior_params(prior)
    nf, cf = _scalar_counts(n, c)
    if nf <= 0:
        none_at = PassKEstimate(PASS_AT_K, k, nf, cf, None, None, None, None, None)
        none_pow = PassKEstimate(PASS_POW_K, k, nf, cf, None, None, None, None, None)
        return PassKPair(k, nf, cf, method, level, none_at, none_pow)
    p = cf / nf
    plugin_at, plugin_pow = _scalar_at(p, k), p**k
    unb_at: float | None = None
    unb_pow: float | None = None
    if nf >= k and nf == round(nf) and cf == round(cf):
        unb_at = -math.expm1(_scalar_log_comb_ratio(nf - cf, nf, k))
        unb_pow = math.exp(_scalar_log_comb_ratio(cf, nf, k))
    if method == "bayes":
        alpha, beta = cf + a, nf - cf + b
        mean_pow = math.exp(_scalar_log_beta_ratio(alpha, beta, k))
        mean_at = -math.expm1(_scalar_log_beta_ratio(beta, alpha, k))
        tail = (1.0 - level) / 2.0
        p_lo = float(special.betaincinv(alpha, beta, tail))
        p_hi = float(special.betainccinv(alpha, beta, tail))
    else:
        mean_at, mean_pow = plugin_at, plugin_pow
        lo_arr, hi_arr = _wilson(np.array([nf]), np.array([cf]), level)
        p_lo, p_hi = float(lo_arr[0]), float(hi_arr[0])
    at = PassKEstimate(
        PASS_AT_K, k, nf, cf, plugin_at, unb_at, mean_at, _scalar_at(p_lo, k), _scalar_at(p_hi, k)
    )
    pw = PassKEstimate(PASS_POW_K, k, nf, cf, plugin_pow, unb_pow, mean_pow, p_lo**k, p_hi**k)
    return PassKPair(k, nf, cf, method, level, at, pw)


def _scalar_counts(n: float, c: float) -> tuple[float, float]:
    try:
        nf, cf = float(n), float(c)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"counts must be numbers, got n={n!r}, c={c!r}") from exc
    if not (math.isfinite(nf) and math.isfinite(cf)):
        raise ValueError("counts must be finite numbers")
    if nf < 0 or cf < 0:
        raise ValueError("counts must be >= 0")
    if cf > nf * (1 + 1e-12) + 1e-12:
        raise ValueError(f"successes exceed trials (c={cf!r} > n={nf!r})")
    return nf, min(cf, nf)


def _scalar_log_comb_ratio(top: float, n: float, k: int) -> float:
    if top < k:
        return -math.inf
    if k > _PRODUCT_MAX_K:
        return (
            math.lgamma(top + 1)
            - math.lgamma(top - k + 1)
            - math.lgamma(n + 1)
            + math.lgamma(n - k + 1)
        )
    gap = n - top
    out = 0.0
    for i in range(k):
        x = gap / (n - i)
        out += math.log1p(-x) if x < 0.5 else math.log((top - i) / (n - i))
    return out


def _scalar_at(p: float, k: int) -> float:
    return 1.0 if p >= 1.0 else -math.expm1(k * math.log1p(-p))


def _scalar_log_beta_ratio(alpha: float, beta: float, k: int) -> float:
    if k > _PRODUCT_MAX_K:
        return float(special.betaln(alpha + k, beta) - special.betaln(alpha, beta))
    total = alpha + beta
    out = 0.0
    for i in range(k):
        x = beta / (total + i)
        out += math.log1p(-x) if x < 0.5 else math.log((alpha + i) / (total + i))
    return out


@dataclass(frozen=True, slots=True)
class TaskAggregate:
    """Across tasks for one k.

    `mean_unbiased_*`: tau-bench style, the mean over tasks of the per-task unbiased
    estimator, using only tasks with n_i >= k and integer counts (`tasks_used` of
    `tasks`); None when no task qualifies. `pooled`: all trials as one group (plug-in,
    unbiased and Bayesian on sum(n), sum(c)).
    """

    k: int
    tasks: int
    tasks_used: int
    mean_unbiased_at_k: float | None
    mean_unbiased_pow_k: float | None
    pooled: PassKPair


def estimate_tasks(
    groups: Sequence[tuple[float, float]] | Iterable[tuple[float, float]],
    ks: Sequence[int] = (1, 3, 5),
    *,
    prior: PriorSpec = "uniform",
    level: float = 0.95,
    method: Method = "bayes",
) -> dict[int, TaskAggregate]:
    """Per-task mean (tau-bench) and pooled estimates for each k; `groups` = (n_i, c_i)."""
    pairs = list(groups)
    ks_valid = [validate_k(k) for k in ks]
    if pairs:
        n_arr, c_arr = _counts([p[0] for p in pairs], [p[1] for p in pairs])
    else:
        n_arr = c_arr = np.zeros(0, dtype=np.float64)
    n_tot, c_tot = float(n_arr.sum()), float(c_arr.sum())
    out: dict[int, TaskAggregate] = {}
    for k in ks_valid:
        at, pw = _unbiased(n_arr, c_arr, k) if n_arr.size else (n_arr, n_arr)
        ok = ~np.isnan(at)
        used = int(ok.sum())
        out[k] = TaskAggregate(
            k=k,
            tasks=len(pairs),
            tasks_used=used,
            mean_unbiased_at_k=float(at[ok].mean()) if used else None,
            mean_unbiased_pow_k=float(pw[ok].mean()) if used else None,
            pooled=estimate(n_tot, c_tot, k, prior=prior, level=level, method=method),
        )
    return out


def tau_bench_means(
    n: npt.ArrayLike, c: npt.ArrayLike, k: int
) -> tuple[float | None, float | None, int]:
    """(mean unbiased pass@k, mean unbiased pass^k, tasks used) over task arrays."""
    n_arr, c_arr = _counts(n, c)
    at, pw = _unbiased(n_arr, c_arr, validate_k(k))
    ok = ~np.isnan(at)
    used = int(ok.sum())
    if not used:
        return None, None, 0
    return float(at[ok].mean()), float(pw[ok].mean()), used
