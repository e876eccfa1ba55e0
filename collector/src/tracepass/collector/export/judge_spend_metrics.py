"""The LLM judge's own spend on /metrics: tokens by type, cost in USD, and the calls
whose cost is unknown (`tracepass_judge_tokens_total`, `tracepass_judge_cost_usd_total`,
`tracepass_judge_unpriced_calls_total`). Its own class: the evaluation metrics count
conversations; this counts what judging them cost."""

from __future__ import annotations

from opentelemetry.metrics import Meter

from tracepass.evaluator.judge.spend import JudgeSpend

__all__ = ["JudgeSpendMetrics"]


class JudgeSpendMetrics:
    def __init__(self, meter: Meter) -> None:
        self.tokens = meter.create_counter(
            "tracepass_judge_tokens",
            description="Tokens of LLM judge calls as the provider reported them, by type",
        )
        self.cost = meter.create_counter(
            "tracepass_judge_cost_usd", description="Cost of LLM judge calls in USD"
        )
        self.unpriced = meter.create_counter(
            "tracepass_judge_unpriced_calls",
            description="LLM judge calls whose cost is unknown (not counted in the cost), by reason",
        )

    def record(self, spend: JudgeSpend) -> None:
        """One judge model call's tokens and cost (unknown cost: counted by reason)."""
        for kind, count in (
            ("input", spend.input_tokens),
            ("output", spend.output_tokens),
            ("cached_input", spend.cached_input_tokens),
            ("reasoning", spend.reasoning_tokens),
        ):
            if count:
                self.tokens.add(count, {"type": kind})
        if spend.cost_usd is not None:
            self.cost.add(spend.cost_usd)
        else:
            self.unpriced.add(1, {"reason": spend.unpriced_reason or "unknown"})
