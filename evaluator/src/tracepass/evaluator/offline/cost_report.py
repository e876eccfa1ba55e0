"""Tokens, cost and latency per agent version for offline runs (`tracepass evaluate`'s
`cost_latency` block, its HTML report, `tracepass compare`).

The figures are the conversations' own (`Conversation.usage` / `.latency`, built from
their spans: docs/cost-latency.md); this module only groups them by version with the
rules of `usage.version_figures` (unknown costs and durations left out and counted).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tracepass.evaluator.cost_latency import TOKEN_FIELDS, version_figures
from tracepass.evaluator.models import Conversation
from tracepass.evaluator.scoring.explain import natural_key

__all__ = ["cost_latency_by_version"]


def cost_latency_by_version(conversations: Iterable[Conversation]) -> list[dict[str, Any]]:
    """One entry per (agent, version): conversations, model calls, tokens by type (sum
    over the conversations whose count is known; null when none is), cost per
    conversation (mean, p95, total over the priced ones) and wall latency p50/p95."""
    groups: dict[tuple[str | None, str | None], list[Conversation]] = {}
    for conv in conversations:
        groups.setdefault((conv.agent_name, conv.agent_version), []).append(conv)
    out: list[dict[str, Any]] = []
    for (name, version), convs in sorted(
        groups.items(), key=lambda kv: (natural_key(kv[0][0]), natural_key(kv[0][1]))
    ):
        usages = [c.usage for c in convs if c.usage is not None]
        tokens: dict[str, int | None] = {}
        for field in TOKEN_FIELDS:
            known = [getattr(u, field) for u in usages if getattr(u, field) is not None]
            tokens[field] = sum(known) if known else None
        figures = version_figures(
            [None if c.usage is None else c.usage.cost_usd for c in convs],
            [None if c.latency is None else c.latency.duration_s for c in convs],
        )
        out.append(
            {
                "agent_name": name,
                "agent_version": version,
                **figures.model_dump(mode="json"),
                "model_calls": sum(u.model_calls for u in usages),
                "tokens": tokens,
            }
        )
    return out
