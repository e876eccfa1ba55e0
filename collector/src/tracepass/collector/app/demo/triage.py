"""What the demo prints at the end about failures and proposed references: the top
failure modes per version (docs/failure-modes.md) and the reference candidates
(docs/reference-candidates.md), read from the running collector before it stops."""

from __future__ import annotations

from typing import Any

from tracepass.collector.api import failure_modes_json

__all__ = ["MAX_MODES", "triage_lines"]

MAX_MODES = 3  # per version


def triage_lines(service: Any) -> list[str]:
    """Plain lines (hostile text is the demo's own; still shown with `repr` quoting)."""
    pipeline = getattr(service, "pipeline", None)
    store = getattr(pipeline, "store", None)
    lines: list[str] = []
    if store is not None:
        for agent, version in store.failure_modes.versions():
            body = failure_modes_json(
                store,
                {"agent_name": agent, "agent_version": version, "limit": str(MAX_MODES)},
            )
            if not body["failure_modes"]:
                continue
            lines.append(
                f"top failure modes of {agent} {version} ({body['failing_conversations']} failing):"
            )
            for m in body["failure_modes"]:
                share = "" if m["share"] is None else f" {m['share']:.0%}"
                new = "  new" if m["new"] else ""
                lines.append(f"  {m['signature']!r} x{m['count']}{share}{new}")
    triage = getattr(service, "triage", None)
    if triage is not None:
        for c in triage.candidates.proposals():
            lines.append(
                f"reference candidate {c.id}: {c.query!r} ({c.conversations} conversations "
                f"agree, {', '.join(c.tools) or 'no tools'})"
            )
    return lines
