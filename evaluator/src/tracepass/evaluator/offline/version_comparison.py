"""Compare two `tracepass evaluate --format json` documents (base vs candidate).

Trials are grouped by reference id exactly as in `evaluate`: every conversation matched
to a reference is one trial of that task; conversations whose outcome is ``error`` (the
grader or judge gave no verdict) are not trials of the agent and are left out.

"Is the candidate better?" is answered with Beta posteriors on each side's success rate
(uniform Beta(1, 1) prior, so Beta(c + 1, n - c + 1)) and the probability
P(p_candidate > p_base) computed **exactly by numerical integration** (scipy ``quad``)
of ``f_cand(x) · F_base(x)`` over the region holding all but 1e-12 of the candidate's
posterior mass. Since pass@k = 1 - (1 - p)^k and pass^k = p^k are increasing in p, the
same probability holds for every k under the pooled model.

A reference *regresses* when its success rate or its mean tool-correctness score drops
by more than ``tolerance``; regressions are listed first, most certain first.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scipy import integrate, special

from tracepass.evaluator.offline.gates import point_estimate
from tracepass.evaluator.stats import passk
from tracepass.evaluator.vocabulary import K_METRICS, PASS_AT_K, PASS_POW_K

_TAIL = 1e-12


class CompareInputError(ValueError):
    """A document that is not the output of `tracepass evaluate --format json`."""


def prob_better(c_cand: float, n_cand: float, c_base: float, n_base: float) -> float:
    """P(p_cand > p_base) under independent Beta(c + 1, n - c + 1) posteriors.

    The integrand is written with `scipy.special` (log-density, regularized incomplete
    beta) rather than `scipy.stats` frozen distributions: quad evaluates it a few hundred
    times and the frozen-distribution overhead made one call ~20 ms instead of ~1 ms.
    """
    a1, b1 = c_cand + 1.0, n_cand - c_cand + 1.0
    a2, b2 = c_base + 1.0, n_base - c_base + 1.0
    log_norm = float(special.betaln(a1, b1))
    lo = float(special.betaincinv(a1, b1, _TAIL))
    hi = 1.0 - float(special.betaincinv(b1, a1, _TAIL))

    def integrand(x: float) -> float:
        if x <= 0.0 or x >= 1.0:
            return 0.0
        log_pdf = (a1 - 1.0) * math.log(x) + (b1 - 1.0) * math.log1p(-x) - log_norm
        return math.exp(log_pdf) * float(special.betainc(a2, b2, x))

    # Points where the integrand changes fastest: both posteriors' means.
    points = sorted({p for p in (a1 / (a1 + b1), a2 / (a2 + b2)) if lo < p < hi})
    value, _err = integrate.quad(
        integrand,
        lo,
        hi,
        points=points or None,
        limit=200,
        epsabs=1e-12,
        epsrel=1e-10,
    )
    return min(1.0, max(0.0, float(value)))


def pass_point(n: int, c: int, k: int, *, power: bool) -> float | None:
    """One task's point estimate: unbiased when n ≥ k, plug-in otherwise (as in gates)."""
    if n <= 0:
        return None
    est = passk.estimate(n, c, k)
    value, _estimator = point_estimate(
        {
            "unbiased": (est.pass_pow_k if power else est.pass_at_k).unbiased,
            "plugin": (est.pass_pow_k if power else est.pass_at_k).plugin,
        }
    )
    return value


@dataclass
class _Side:
    n: int = 0
    correct: int = 0
    tool_scores: list[float] | None = None

    def add(self, conversation: Mapping[str, Any]) -> None:
        self.n += 1
        self.correct += int(bool(conversation.get("correct")))
        for turn in conversation.get("turns") or []:
            tc = turn.get("tool_correctness")
            if tc is not None:
                if self.tool_scores is None:
                    self.tool_scores = []
                self.tool_scores.append(float(tc["overall"]))

    @property
    def rate(self) -> float | None:
        return self.correct / self.n if self.n else None

    @property
    def tool_correctness(self) -> float | None:
        return sum(self.tool_scores) / len(self.tool_scores) if self.tool_scores else None

    def as_json(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "correct": self.correct,
            "rate": self.rate,
            "tool_correctness": self.tool_correctness,
        }


def _delta(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else b - a


def _validate(doc: Any, name: str) -> Mapping[str, Any]:
    if not isinstance(doc, Mapping):
        raise CompareInputError(f"{name}: expected a JSON object from `tracepass evaluate`")
    for key in ("summary", "conversations"):
        if key not in doc:
            raise CompareInputError(f"{name}: missing key {key!r} (not `evaluate` JSON output)")
    if not isinstance(doc["conversations"], list):
        raise CompareInputError(f"{name}: 'conversations' must be a list")
    for i, conv in enumerate(doc["conversations"]):
        if not isinstance(conv, Mapping) or "correct" not in conv or "reference_id" not in conv:
            raise CompareInputError(
                f"{name}: conversations[{i}] lacks 'reference_id'/'correct' "
                "(not `evaluate` JSON output)"
            )
    return doc


def group_trials(doc: Mapping[str, Any]) -> dict[str, _Side]:
    groups: dict[str, _Side] = defaultdict(_Side)
    for conv in doc["conversations"]:
        ref = conv.get("reference_id")
        if ref is None or conv.get("outcome") in ("error", "unscored"):
            continue
        groups[str(ref)].add(conv)
    return dict(groups)


def _ks(base: Mapping[str, Any], cand: Mapping[str, Any]) -> list[int]:
    def keys(doc: Mapping[str, Any]) -> set[int]:
        return {int(k) for k in (doc["summary"].get("pass_at_k") or {})}

    common = keys(base) & keys(cand)
    return sorted(common) if common else [1]


def _status(delta_rate: float | None, delta_tool: float | None, tolerance: float) -> str:
    deltas = [d for d in (delta_rate, delta_tool) if d is not None]
    if any(d < -tolerance for d in deltas):
        return "regressed"
    if any(d > tolerance for d in deltas):
        return "improved"
    return "unchanged"


def compare_documents(
    base: Any,
    candidate: Any,
    *,
    tolerance: float = 0.0,
    base_name: str = "BASE",
    candidate_name: str = "CANDIDATE",
) -> dict[str, Any]:
    """The comparison as a JSON-ready dict (``overall``, ``references``, ``regressions``)."""
    base = _validate(base, base_name)
    candidate = _validate(candidate, candidate_name)
    ks = _ks(base, candidate)
    base_groups, cand_groups = group_trials(base), group_trials(candidate)

    references: list[dict[str, Any]] = []
    for ref in sorted(set(base_groups) | set(cand_groups)):
        b, c = base_groups.get(ref), cand_groups.get(ref)
        entry: dict[str, Any] = {
            "reference_id": ref,
            "base": b.as_json() if b else None,
            "candidate": c.as_json() if c else None,
        }
        if b is None or c is None:
            entry.update(
                status="only_candidate" if b is None else "only_base",
                delta_rate=None,
                delta_tool_correctness=None,
                prob_candidate_better=None,
                pass_at_k={},
                pass_pow_k={},
            )
        else:
            d_rate = _delta(b.rate, c.rate)
            d_tool = _delta(b.tool_correctness, c.tool_correctness)
            entry.update(
                status=_status(d_rate, d_tool, tolerance),
                delta_rate=d_rate,
                delta_tool_correctness=d_tool,
                prob_candidate_better=prob_better(c.correct, c.n, b.correct, b.n),
            )
            for metric, power in ((PASS_AT_K, False), (PASS_POW_K, True)):
                block = {}
                for k in ks:
                    bv = pass_point(b.n, b.correct, k, power=power)
                    cv = pass_point(c.n, c.correct, k, power=power)
                    block[str(k)] = {"base": bv, "candidate": cv, "delta": _delta(bv, cv)}
                entry[metric] = block
        references.append(entry)

    order = {"regressed": 0, "improved": 1, "unchanged": 2, "only_base": 3, "only_candidate": 4}
    references.sort(
        key=lambda e: (
            order[e["status"]],
            e["prob_candidate_better"] if e["prob_candidate_better"] is not None else 1.0,
            e["reference_id"],
        )
    )

    overall = _overall(base, candidate, base_groups, cand_groups, ks, tolerance)
    return {
        "ks": ks,
        "tolerance": tolerance,
        "overall": overall,
        "cost_latency": _cost_latency(base, candidate),
        "regressions": [e["reference_id"] for e in references if e["status"] == "regressed"],
        "references": references,
    }


_COST_FIGURES = ("cost_usd_mean", "cost_usd_p95", "duration_s_p50", "duration_s_p95")


def _cost_latency(base: Mapping[str, Any], candidate: Mapping[str, Any]) -> dict[str, Any]:
    """Each document's `cost_latency` (per agent version: `evaluate`'s block; absent in
    documents written before it: an empty list), and, when each holds one version, the
    candidate's change of cost per conversation and latency (null where unknown)."""
    b = list(base.get("cost_latency") or [])
    c = list(candidate.get("cost_latency") or [])
    delta: dict[str, float | None] | None = None
    if len(b) == 1 and len(c) == 1:
        delta = {name: _delta(b[0].get(name), c[0].get(name)) for name in _COST_FIGURES}
    return {"base": b, "candidate": c, "delta": delta}


def _overall(
    base: Mapping[str, Any],
    candidate: Mapping[str, Any],
    base_groups: Mapping[str, _Side],
    cand_groups: Mapping[str, _Side],
    ks: Sequence[int],
    tolerance: float,
) -> dict[str, Any]:
    def pooled(groups: Mapping[str, _Side]) -> _Side:
        total = _Side()
        for side in groups.values():
            total.n += side.n
            total.correct += side.correct
            if side.tool_scores:
                total.tool_scores = (total.tool_scores or []) + side.tool_scores
        return total

    b, c = pooled(base_groups), pooled(cand_groups)
    result: dict[str, Any] = {
        "base": b.as_json(),
        "candidate": c.as_json(),
        "delta_rate": _delta(b.rate, c.rate),
        "delta_tool_correctness": _delta(b.tool_correctness, c.tool_correctness),
        "prob_candidate_better": prob_better(c.correct, c.n, b.correct, b.n)
        if b.n and c.n
        else None,
    }
    result["status"] = _status(result["delta_rate"], result["delta_tool_correctness"], tolerance)
    for metric in K_METRICS:
        block = {}
        for k in ks:
            bv, est_b = point_estimate(base["summary"].get(metric, {}).get(str(k)) or {})
            cv, est_c = point_estimate(candidate["summary"].get(metric, {}).get(str(k)) or {})
            block[str(k)] = {
                "base": bv,
                "candidate": cv,
                "delta": _delta(bv, cv),
                "estimator": est_b if est_b == est_c else f"{est_b}/{est_c}",
            }
        result[metric] = block
    return result
