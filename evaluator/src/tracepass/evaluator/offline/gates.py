"""CI gates for `tracepass evaluate --fail-under METRIC=VALUE`.

A gate compares one number of the evaluation summary with a floor. Which number is
compared is decided here, once, so the CLI, the HTML report and `tracepass compare`
agree on what "the point estimate" of pass@k means:

* pass@k / pass^k: the unbiased (tau-bench) mean over tasks with at least k trials; when
  no task has k trials (typical for one run per reference) the pooled plug-in value,
  which for k = 1 is the same number. With ``--gate-on lower`` the lower bound of the
  exact Beta credible interval of the pooled success rate, transformed to pass@k / pass^k.
* proportions (conversation, tool and answer correctness): the observed rate, or the
  lower credible bound of its Beta posterior.

A gate whose metric has no data fails: "no evidence" must never pass a CI gate.

Without any `--fail-under`, the run is gated by the readiness rule
(`tracepass.evaluator.stats.readiness`, pass^headline_k against its target on the credible
interval): it fails when the verdict is "needs improvement", even the upper bound below
the target, which is exactly when the alert fires; "production ready", "inconclusive"
(too few trials to tell either way) and "insufficient data" pass it, as they do not
fire the alert. Require more with explicit gates: `--fail-under pass_pow_k@3=0.7
--gate-on lower` asks "production ready" at the defaults (a lower bound exactly at the
target passes that gate, which compares with >=, but is not production ready).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from tracepass.evaluator.stats.readiness import Readiness, Verdict
from tracepass.evaluator.vocabulary import K_METRICS

#: Proportion metrics: summary key of a block with ``rate``/``lower``/``upper``.
PROPORTION_METRICS = ("conversation_correctness", "tool_correctness", "answer_correctness")
#: Metrics that take a ``@K`` suffix.

_GATE_RE = re.compile(r"^\s*(?P<metric>[a-z_]+)(?:@(?P<k>[^=\s]+))?\s*=\s*(?P<value>\S+)\s*$")


class GateOn(StrEnum):
    POINT = "point"
    LOWER = "lower"


class GateError(ValueError):
    """A `--fail-under` expression that cannot be understood (exit code 2)."""


@dataclass(frozen=True)
class Gate:
    metric: str
    k: int | None
    floor: float

    @property
    def label(self) -> str:
        return f"{self.metric}@{self.k}" if self.k is not None else self.metric


@dataclass(frozen=True)
class GateOutcome:
    gate: Gate
    value: float | None
    estimator: str
    passed: bool
    # The default gate's readiness sentence (estimator READINESS).
    readiness_sentence: str = ""

    def describe(self) -> str:
        """What was required and what was found, read as a sentence:
        `pass_pow_k@3 lower bound 0.196 < required 0.8`."""
        if self.estimator == READINESS:
            return self.readiness_sentence
        what = _ESTIMATOR_WORDS.get(self.estimator, self.estimator)
        if self.value is None:
            return f"{self.gate.label}: no value (too few conversations?), required {self.gate.floor:g}"
        relation = ">=" if self.passed else "<"
        return f"{self.gate.label} {what} {self.value:.3f} {relation} required {self.gate.floor:g}"

    def as_json(self) -> dict[str, Any]:
        return {
            "metric": self.gate.label,
            "floor": self.gate.floor,
            "value": self.value,
            "estimator": self.estimator,
            "passed": self.passed,
        }


#: The estimator of the default gate: the readiness rule's verdict.
READINESS = "readiness"
#: The readiness tiers the default gate fails.
FAILING_TIERS = frozenset({Readiness.NEEDS_IMPROVEMENT})

_ESTIMATOR_WORDS = {
    "lower": "lower bound",
    "unbiased": "unbiased estimate",
    "plugin": "plug-in estimate",
    "rate": "rate",
}


def valid_metrics(ks: Sequence[int]) -> list[str]:
    """Every metric name accepted for the given k values (used in error messages)."""
    names = [f"{m}@{k}" for m in K_METRICS for k in ks]
    return names + list(PROPORTION_METRICS)


def parse_gate(text: str, ks: Sequence[int]) -> Gate:
    """Parse ``METRIC=VALUE``; k-metrics need a k that the run computes."""
    match = _GATE_RE.match(text)
    valid = ", ".join(valid_metrics(ks))
    if match is None:
        raise GateError(f"--fail-under {text!r}: expected METRIC=VALUE (valid metrics: {valid})")
    metric, k_text, value_text = match.group("metric", "k", "value")
    try:
        floor = float(value_text)
    except ValueError:
        raise GateError(f"--fail-under {text!r}: {value_text!r} is not a number") from None
    if not 0.0 <= floor <= 1.0:
        raise GateError(f"--fail-under {text!r}: the floor must be within [0, 1]")
    if metric in K_METRICS:
        if k_text is None:
            raise GateError(f"--fail-under {text!r}: {metric} needs @K (valid metrics: {valid})")
        try:
            k = int(k_text)
        except ValueError:
            raise GateError(f"--fail-under {text!r}: k {k_text!r} is not an integer") from None
        if k not in ks:
            raise GateError(
                f"--fail-under {text!r}: k={k} is not computed; add it to --k "
                f"(valid metrics: {valid})"
            )
        return Gate(metric, k, floor)
    if metric in PROPORTION_METRICS and k_text is None:
        return Gate(metric, None, floor)
    raise GateError(f"--fail-under {text!r}: unknown metric (valid metrics: {valid})")


def point_estimate(block: Mapping[str, Any]) -> tuple[float | None, str]:
    """The point value of a pass@k / pass^k block and the estimator it came from."""
    unbiased = block.get("unbiased")
    if unbiased is not None:
        return float(unbiased), "unbiased"
    plugin = block.get("plugin")
    return (float(plugin), "plugin") if plugin is not None else (None, "none")


def gate_value(summary: Mapping[str, Any], gate: Gate, on: GateOn) -> tuple[float | None, str]:
    if gate.metric in K_METRICS:
        block = summary.get(gate.metric, {}).get(str(gate.k)) or {}
        if on is GateOn.LOWER:
            lower = block.get("lower")
            return (float(lower), "lower") if lower is not None else (None, "none")
        return point_estimate(block)
    block = summary.get(gate.metric) or {}
    key = "lower" if on is GateOn.LOWER else "rate"
    value = block.get(key)
    return (float(value), key) if value is not None else (None, "none")


def check_gates(
    summary: Mapping[str, Any], gates: Sequence[Gate], on: GateOn = GateOn.POINT
) -> list[GateOutcome]:
    outcomes = []
    for gate in gates:
        value, estimator = gate_value(summary, gate, on)
        # A tiny tolerance so 0.9 computed as 0.8999999999999999 still meets a 0.9 floor.
        passed = value is not None and value >= gate.floor - 1e-12
        outcomes.append(GateOutcome(gate, value, estimator, passed))
    return outcomes


def readiness_gate(summary: Mapping[str, Any]) -> GateOutcome:
    """The gate of a run given no `--fail-under`: the summary's readiness verdict
    (pass^k at the rule's k, floor its target) fails on FAILING_TIERS."""
    verdict = Verdict.from_json(dict(summary["readiness"]))
    gate = Gate("pass_pow_k", verdict.k, verdict.target)
    passed = verdict.tier not in FAILING_TIERS
    return GateOutcome(gate, verdict.upper, READINESS, passed, verdict.sentence())


def gate_run(
    summary: Mapping[str, Any],
    gates: Sequence[Gate],
    on: GateOn = GateOn.POINT,
    *,
    readiness_default: bool = True,
) -> list[GateOutcome]:
    """The outcomes a run exits on: its `--fail-under` gates, else the readiness gate
    (unless `--no-readiness-gate`)."""
    if gates:
        return check_gates(summary, gates, on)
    return [readiness_gate(summary)] if readiness_default else []
