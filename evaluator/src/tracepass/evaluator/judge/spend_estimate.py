"""What a judge call will cost, estimated before it is made, so the money cap can be
reserved up front (`call_budget.JudgeBudget.try_reserve`).

The estimate must rather be high than low: a low one lets the day's spend pass the cap.
It is the larger of two figures: the prompt priced at one token per
`CHARS_PER_TOKEN` characters (fewer characters per token than English averages, so
high) with as many output tokens as the most this judge's model has answered with
(`DEFAULT_OUTPUT_TOKENS` until its first priced answer), and the dearest call this judge has
made. Until the judge's first answer there is no history, so a judge under a money cap
makes its calls one at a time until then (`calibrated`). A model without a price has no estimate (0): such calls can only be bounded by
the call limits, which is why a money cap refuses an unpriced judge at config time.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable

from tracepass.evaluator.pricing import PriceBook, TokenUsage

__all__ = ["CHARS_PER_TOKEN", "DEFAULT_OUTPUT_TOKENS", "SpendEstimator"]

CHARS_PER_TOKEN = 3
DEFAULT_OUTPUT_TOKENS = 512


class SpendEstimator:
    """Thread-safe; learns from every priced call of its judge (`observe`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._max_cost = 0.0
        self._max_output: int | None = None
        self._answered = False

    @property
    def calibrated(self) -> bool:
        """Whether an answer has been seen (its cost, or that it has none)."""
        return self._answered

    def observe(self, cost_usd: float | None, output_tokens: int | None) -> None:
        with self._lock:
            self._answered = True
            if cost_usd is not None and math.isfinite(cost_usd) and cost_usd > self._max_cost:
                self._max_cost = cost_usd
            if output_tokens is not None and output_tokens >= 0:
                self._max_output = max(self._max_output or 0, output_tokens)

    def estimate(self, model: str | None, texts: Iterable[str], price: PriceBook) -> float:
        """USD that a call sending `texts` to `model` is expected to cost at most."""
        chars = sum(len(t) for t in texts)
        with self._lock:
            max_cost, max_output = self._max_cost, self._max_output
        tokens = -(-chars // CHARS_PER_TOKEN)
        output = DEFAULT_OUTPUT_TOKENS if max_output is None else max_output
        try:
            priced = price.cost_usd(model, TokenUsage(tokens, output))
        except Exception:  # a price lookup never breaks judging: fall back to history
            priced = None
        return max(priced or 0.0, max_cost)
