"""`ModelUsage`: what a model-call span says about its tokens and provider, kept on the
record (`SpanRecord.usage`). Read at ingest by `normalize/usage.py`; stored by the state
codec; read by assembly's timeline and the views."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ModelUsage"]


# Not frozen, built positionally: a frozen dataclass's `__init__` assigns through
# `object.__setattr__`, which tripled the cost of reading usage at ingest (one per model
# call). Treated as immutable all the same: nothing assigns to a field after reading.
@dataclass(slots=True)
class ModelUsage:
    """What one model-call span says about its tokens (None: not carried or unusable)."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_input_tokens: int | None = None
    reasoning_tokens: int | None = None
    provider: str | None = None
    # "input_tokens: negative (-3)"-style notes, "; "-joined; None when all were usable.
    problem: str | None = None
    # Input tokens written to the provider's prompt cache (Anthropic's cache creation).
    cache_write_input_tokens: int | None = None
    # The call's cost as the span reports it (a gateway's or provider's figure, USD).
    cost_usd: float | None = None
