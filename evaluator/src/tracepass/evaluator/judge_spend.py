"""What one LLM-judge call spent: its tokens (langchain-core `usage_metadata`) and cost.

The judge is the collector's only paid call, and its owners ask what it costs as much as
what the agent costs. Every model call the judge makes (retries included; cache hits are
free) yields a `JudgeSpend`: the tokens the provider reported on the `AIMessage` and the
price of those tokens in USD, from the project's one price table
(`tracepass.evaluator.pricing`, written for issue 23's cost figures). A count the
provider did not report is None, never 0; a model the price table does not know gets no
cost (None), never a guessed one: `tracepass_judge_unpriced_calls_total` counts those.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["JudgeSpend", "PriceFn", "default_price", "spend_of"]

log = logging.getLogger(__name__)

# (model, usage) -> USD, or None when the model or a needed count is unknown. `usage`
# carries input_tokens, output_tokens, cached_input_tokens, reasoning_tokens (int|None).
PriceFn = Callable[[str | None, Mapping[str, int | None]], float | None]


@dataclass(frozen=True, slots=True)
class JudgeSpend:
    """One judge model call's usage. `cost_usd` None: unpriced, and `unpriced_reason` says
    why: no_usage, no_price_table, missing_tokens, lookup_failed or unknown_model."""

    model: str | None
    input_tokens: int | None
    output_tokens: int | None
    cached_input_tokens: int | None
    reasoning_tokens: int | None
    cost_usd: float | None
    unpriced_reason: str | None = None

    def usage(self) -> dict[str, int | None]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cached_input_tokens": self.cached_input_tokens,
            "reasoning_tokens": self.reasoning_tokens,
        }


def _count(value: Any) -> int | None:
    """A token count as the provider gave it: a non-negative int, else unknown."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
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
    if spend.input_tokens is None or spend.output_tokens is None:
        return _unpriced(spend, "missing_tokens")
    try:
        cost = price(model, spend.usage())
    except Exception as exc:  # a price lookup must never break judging
        log.warning("judge call price lookup failed for %r: %s", model, exc)
        return _unpriced(spend, "lookup_failed")
    if cost is None:
        return _unpriced(spend, "unknown_model")
    return JudgeSpend(**{**_fields(spend), "cost_usd": float(cost)})


def _fields(spend: JudgeSpend) -> dict[str, Any]:
    return {name: getattr(spend, name) for name in JudgeSpend.__slots__}


def _unpriced(spend: JudgeSpend, reason: str) -> JudgeSpend:
    return JudgeSpend(**{**_fields(spend), "cost_usd": None, "unpriced_reason": reason})


def default_price() -> PriceFn | None:
    """The project's price table (`tracepass.evaluator.pricing.cost_usd`) when this
    build has it; None otherwise (every judge call is then unpriced and counted)."""
    try:
        module = importlib.import_module("tracepass.evaluator.pricing")
    except ImportError:
        return None
    fn = getattr(module, "cost_usd", None)
    return fn if callable(fn) else None
