"""Tokens, model calls, cost and wall latency of evaluated conversations, per agent,
version and reference set (the common labels, bounded like every evaluation family).

Fed from the conversation's own figures (`Conversation.usage` / `.latency`, built from
its spans at assembly: docs/cost-latency.md), on the hot path's light instruments.
Counted once per conversation: a revision (late spans) replaces the evaluation but does
not add its tokens or cost again. A figure that is unknown is not observed (no 0 in a
histogram for a cost nobody knows); each model call without a price is counted in
`tracepass_model_calls_unpriced_total{reason}` instead.
"""

from __future__ import annotations

from typing import Final

from tracepass.collector.export.preaggregated import Instruments, Key
from tracepass.evaluator.cost_latency import KIND_MODEL
from tracepass.evaluator.models import Conversation

__all__ = ["COST_BUCKETS", "DURATION_BUCKETS", "TOKEN_TYPES", "UsageMetrics"]

# USD per conversation: a cached small-model call is ~1e-5, a long agent run ~10.
COST_BUCKETS: Final = (0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0)
DURATION_BUCKETS: Final = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800)
# `type` label value → Usage field.
TOKEN_TYPES: Final = (
    ("input", "input_tokens"),
    ("output", "output_tokens"),
    ("cached_input", "cached_input_tokens"),
    ("reasoning", "reasoning_tokens"),
)
# The reasons of `pricing.Priced` (bounded); anything else is "other".
_REASONS: Final = frozenset({"missing_model", "missing_tokens", "invalid_usage", "unknown_model"})


class UsageMetrics:
    """The four families of issue 23 plus the unpriced-call count, on `ins`."""

    def __init__(self, ins: Instruments, labels: tuple[str, ...]) -> None:
        self.cost = ins.histogram(
            "tracepass_conversation_cost_usd",
            "Cost of evaluated conversations in USD (priced ones only)",
            labels,
            COST_BUCKETS,
        )
        self.duration = ins.histogram(
            "tracepass_conversation_duration",
            "Wall latency of evaluated conversations: first span start to last span end",
            labels,
            DURATION_BUCKETS,
            unit="s",
        )
        self.tokens = ins.counter(
            "tracepass_tokens", "Tokens of evaluated conversations' model calls, by type",
            (*labels, "type"),
        )  # fmt: skip
        self.model_calls = ins.counter(
            "tracepass_model_calls", "Model calls in evaluated conversations", labels
        )
        self.unpriced = ins.counter(
            "tracepass_model_calls_unpriced",
            "Model calls without a cost, by reason (unknown model, missing or invalid counts)",
            (*labels, "reason"),
        )
        self._keys: dict[Key, tuple[Key, ...]] = {}

    def record(self, key: Key, conversation: Conversation) -> None:
        """Observe one conversation's figures (call under the instruments' lock)."""
        usage = conversation.usage
        latency = conversation.latency
        if latency is not None and latency.duration_s is not None:
            self.duration.record(latency.duration_s, key)
        if usage is None:
            return
        if usage.cost_usd is not None:
            self.cost.record(usage.cost_usd, key)
        if usage.model_calls:
            self.model_calls.add(usage.model_calls, key)
        typed = self._keys.get(key)
        if typed is None:
            if len(self._keys) >= 4096:
                self._keys.clear()
            typed = self._keys[key] = tuple((*key, t) for t, _ in TOKEN_TYPES)
        for (_, name), typed_key in zip(TOKEN_TYPES, typed, strict=True):
            count = getattr(usage, name)
            if count:
                self.tokens.add(count, typed_key)
        if usage.cost_usd is None and usage.model_calls:
            for turn in conversation.turns:
                for span in turn.spans:
                    if span.kind == KIND_MODEL and span.cost_usd is None:
                        why = span.missing.get("cost_usd", "other").split(":", 1)[0]
                        self.unpriced.add(1, (*key, why if why in _REASONS else "other"))
