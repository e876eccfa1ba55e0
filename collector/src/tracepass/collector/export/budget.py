"""`tracepass_judge_budget_remaining{period}`: what is left of the judge budget.

An observable gauge read at each scrape, so the figure is current without any work on
the evaluation path. Periods without a limit are not exported (absent, not infinite).
"""

from __future__ import annotations

from collections.abc import Iterable

from opentelemetry.metrics import CallbackOptions, Meter, Observation

from tracepass.evaluator.judge.call_budget import JudgeBudget

__all__ = ["register_budget_gauge"]


def register_budget_gauge(meter: Meter, budget: JudgeBudget) -> None:
    def observe(options: CallbackOptions) -> Iterable[Observation]:
        for period, left in budget.remaining().items():
            yield Observation(left, {"period": period})

    meter.create_observable_gauge(
        "tracepass_judge_budget_remaining",
        callbacks=[observe],
        description="LLM-judge calls left in the budget, per period (minute, day)",
    )
