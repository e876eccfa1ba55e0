"""Numbers at the end of a probe: per reference, the unbiased pass@k / pass^k over its
K trials (C(c,k)/C(n,k) and its complement form) with the Beta posterior interval;
for the suite, the same `summary` block as `tracepass evaluate --format json`.

Counted trials are outcomes pass / fail / incomplete. `error` (a grader could not
decide), `missing` (no evaluation arrived) and `transport` (agent unreachable) are
reported per reference but are not trials: they say nothing about the agent; nor does
`simulator_fault` (a simulated user that strayed from its instructions), whose share of
the simulated trials the summary reports (`summary.simulator_faults`)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from tracepass.collector.app.probe.runner import TrialResult
from tracepass.evaluator.offline.evaluation_run import summarize
from tracepass.evaluator.stats import passk

COUNTED = frozenset({"pass", "fail", "incomplete"})


def _clean(value: float | None) -> float | None:
    # 1 - 1.0 style arithmetic can give -0.0; a probability prints as 0.
    return None if value is None else (0.0 if value == 0 else value)


def _block(est: passk.PassKEstimate) -> dict[str, float | None]:
    return {
        "unbiased": _clean(est.unbiased),
        "plugin": _clean(est.plugin),
        "mean": _clean(est.mean),
        "lower": _clean(est.lower),
        "upper": _clean(est.upper),
    }


def reference_rows(
    results: Sequence[TrialResult], ks: Sequence[int], level: float = 0.95
) -> list[dict[str, Any]]:
    groups: dict[tuple[str, str], list[TrialResult]] = defaultdict(list)
    for r in results:
        groups[(r.reference_set, r.reference_id)].append(r)
    rows = []
    for (set_name, ref_id), items in sorted(groups.items()):
        counted = [r for r in items if r.outcome in COUNTED]
        n, c = len(counted), sum(1 for r in counted if r.correct)
        at: dict[str, Any] = {}
        pw: dict[str, Any] = {}
        for k in ks:
            pair = passk.estimate(n, c, k, level=level)
            at[str(k)] = _block(pair.pass_at_k)
            pw[str(k)] = _block(pair.pass_pow_k)
        not_counted: dict[str, int] = defaultdict(int)
        for r in items:
            if r.outcome not in COUNTED:
                not_counted[r.outcome] += 1
        rows.append(
            {
                "reference_id": ref_id,
                "reference_set": set_name,
                "trials": n,
                "correct": c,
                "not_counted": dict(not_counted),
                "pass_at_k": at,
                "pass_pow_k": pw,
            }
        )
    return rows


def probe_document(
    results: Sequence[TrialResult],
    ks: Sequence[int],
    *,
    run: dict[str, Any],
    level: float = 0.95,
) -> dict[str, Any]:
    """`tracepass probe --format json`: run metadata, per-reference rows, the suite
    summary (evaluate's shape) and every trial."""
    evaluations = [
        {**r.evaluation, "outcome": r.outcome, "correct": r.correct}
        for r in results
        if r.evaluation is not None and r.outcome in COUNTED
    ]
    summary = summarize(evaluations, ks, level=level)
    summary["not_counted"] = sum(1 for r in results if r.outcome not in COUNTED)
    simulated = [r for r in results if r.simulation is not None]
    if simulated:
        faults = sum(1 for r in simulated if r.outcome == "simulator_fault")
        # τ²: up to 30 % of failures were the simulated user's; say how many here.
        summary["simulator_faults"] = {
            "count": faults,
            "of": len(simulated),
            "share": faults / len(simulated),
        }
    return {
        "run": run,
        "references": reference_rows(results, ks, level),
        "summary": summary,
        "trials": [r.to_json() for r in results],
    }
