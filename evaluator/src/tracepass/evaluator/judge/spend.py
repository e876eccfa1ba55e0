"""What one LLM-judge call spent: its tokens (langchain-core `usage_metadata`) and cost.

The judge is the collector's only paid call, and its owners ask what it costs as much as
what the agent costs. Every model call the judge makes (retries included; cache hits are
free) yields a `JudgeSpend`: the tokens the provider reported on the `AIMessage` and the
price of those tokens in USD from the project's one price table (`pricing.PriceBook`:
the config's `pricing.models`, then `genai-prices`). A count the provider did not report
is None, never 0; a call that cannot be priced (unknown model, missing counts) has no
cost, never a guessed one, and says why (`unpriced_reason`):
`tracepass_judge_unpriced_calls_total{reason}` counts those.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tracepass.evaluator.pricing import PriceBook, TokenUsage

__all__ = ["JudgeSpend", "PriceFn", "spend_of"]

log = logging.getLogger(__name__)

PriceFn = PriceBook  # what prices the judge's calls


@dataclass(frozen=True, slots=True)
class JudgeSpend:
    """One judge model call's usage. `cost_usd` None: unpriced, and `unpriced_reason` says
    why: no_usage (the reply carried no usage_metadata), no_price_table, lookup_failed,
    or the price book's reasons (missing_model, missing_tokens, invalid_usage,
    unknown_model)."""

    model: str | None
    input_tokens: int | None
    output_tokens: int | None
    cached_input_tokens: int | None
    reasoning_tokens: int | None
    cost_usd: float | None
    unpriced_reason: str | None = None

    def usage(self) -> TokenUsage:
        return TokenUsage(
            self.input_tokens, self.output_tokens, self.cached_input_tokens, self.reasoning_tokens
        )


def _count(value: Any) -> int | None:
    """A token count as the provider gave it: an int (a negative one is kept, and the
    price book refuses it as invalid_usage), else unknown."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def _model_of(message: Any, fallback: str | None) -> str | None:
    """The model that answered (`response_metadata`), else the configured one."""
    meta = getattr(message, "response_metadata", None)
    if isinstance(meta, Mapping):
        for key in ("model_name", "model", "model_id"):
            value = meta.get(key)
            if isinstance(value, str) and value:
                return value
    return fallback


def spend_of(message: Any, fallback_model: str | None, price: PriceFn | None) -> JudgeSpend:
    """The spend of the reply `message` (an `AIMessage`; anything else has no usage)."""
    model = _model_of(message, fallback_model)
    meta = getattr(message, "usage_metadata", None)
    if not isinstance(meta, Mapping):
        return JudgeSpend(model, None, None, None, None, None, "no_usage")
    details_in = meta.get("input_token_details")
    details_out = meta.get("output_token_details")
    spend = JudgeSpend(
        model=model,
        input_tokens=_count(meta.get("input_tokens")),
        output_tokens=_count(meta.get("output_tokens")),
        cached_input_tokens=_count(details_in.get("cache_read"))
        if isinstance(details_in, Mapping)
        else None,
        reasoning_tokens=_count(details_out.get("reasoning"))
        if isinstance(details_out, Mapping)
        else None,
        cost_usd=None,
    )
    if price is None:
        return _unpriced(spend, "no_price_table")
    try:
        priced = price.price(model, spend.usage())
    except Exception as exc:  # a price lookup must never break judging
        log.warning("judge call price lookup failed for %r: %s", model, exc)
        return _unpriced(spend, "lookup_failed")
    if priced.cost_usd is None:
        return _unpriced(spend, priced.reason or "unknown_model")
    return JudgeSpend(**{**_fields(spend), "cost_usd": float(priced.cost_usd)})


def _fields(spend: JudgeSpend) -> dict[str, Any]:
    return {name: getattr(spend, name) for name in JudgeSpend.__slots__}


def _unpriced(spend: JudgeSpend, reason: str) -> JudgeSpend:
    return JudgeSpend(**{**_fields(spend), "cost_usd": None, "unpriced_reason": reason})
