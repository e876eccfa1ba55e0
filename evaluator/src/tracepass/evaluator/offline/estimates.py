"""The JSON report's estimate blocks, shared by the run's summary (`evaluation_run`) and
the conversation judges' (`judges_report`): an observed rate with its credible interval,
and pass@k / pass^k pooled over tasks in the report's contract shape."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tracepass.evaluator.stats import passk

__all__ = ["passk_blocks", "proportion"]


def proportion(n: int, c: int, level: float = 0.95) -> dict[str, Any]:
    """Observed rate with the exact Beta(c + 1, n - c + 1) credible interval."""
    if n <= 0:
        return {"n": 0, "correct": 0, "rate": None, "lower": None, "upper": None}
    est = passk.estimate(n, c, 1, level=level).pass_at_k
    return {"n": n, "correct": c, "rate": c / n, "lower": est.lower, "upper": est.upper}


def passk_blocks(
    groups: Sequence[tuple[int, int]], ks: Sequence[int], level: float = 0.95
) -> tuple[dict[str, Any], dict[str, Any], dict[str, int]]:
    """(pass_at_k, pass_pow_k, tasks_used) keyed by str(k), in the JSON contract shape."""
    at: dict[str, Any] = {}
    pw: dict[str, Any] = {}
    used: dict[str, int] = {}
    for k, agg in passk.estimate_tasks(groups, ks, level=level).items():
        pooled = agg.pooled
        at[str(k)] = {
            "plugin": pooled.pass_at_k.plugin,
            "unbiased": agg.mean_unbiased_at_k,
            "mean": pooled.pass_at_k.mean,
            "lower": pooled.pass_at_k.lower,
            "upper": pooled.pass_at_k.upper,
        }
        pw[str(k)] = {
            "plugin": pooled.pass_pow_k.plugin,
            "unbiased": agg.mean_unbiased_pow_k,
            "mean": pooled.pass_pow_k.mean,
            "lower": pooled.pass_pow_k.lower,
            "upper": pooled.pass_pow_k.upper,
        }
        used[str(k)] = agg.tasks_used
    return at, pw, used
