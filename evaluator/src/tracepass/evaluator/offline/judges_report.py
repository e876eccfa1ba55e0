"""Conversation judges in `tracepass evaluate`'s document (docs/judges.md, "Offline").

Offline runs judge the same conversations `serve` would: every evaluated conversation,
with a reference, a policy, or neither (recorded production traffic mostly has neither).
The document gets `judgements` (every verdict, with its conversation) and
`summary.judges` (per judge: its series `judge:<name>` as trials, pass@k / pass^k by the
same estimators as the conversations' own, and the verdicts that are no evidence).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from tracepass.evaluator.judge.conversation_judges import judge_reference_set
from tracepass.evaluator.models import ConversationResult, Outcome
from tracepass.evaluator.offline.estimates import passk_blocks, proportion

__all__ = ["judge_summary", "judgement_rows"]


def judgement_rows(results: Iterable[ConversationResult]) -> list[dict[str, Any]]:
    """Every judgement with its conversation, in result order."""
    rows = []
    for r in results:
        for j in r.judgements:
            rows.append(
                {
                    "conversation_id": r.conversation_id,
                    "agent_name": r.agent_name,
                    "agent_version": r.agent_version,
                    "reference_id": r.reference_id,
                    "series": judge_reference_set(j.name),
                    **j.model_dump(mode="json"),
                }
            )
    return rows


def judge_summary(
    results: Iterable[ConversationResult], ks: Sequence[int], level: float = 0.95
) -> dict[str, Any]:
    """judge name → outcome counts, pass rate and pass@k / pass^k over its verdicts (the
    task of a verdict: the conversation's reference, else the judge's series)."""
    outcomes: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    tasks: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for r in results:
        for j in r.judgements:
            outcomes[j.name][j.outcome.value] += 1
            if j.outcome in (Outcome.PASS, Outcome.FAIL):
                task = r.reference_id or judge_reference_set(j.name)
                tasks[j.name][task][0] += 1
                tasks[j.name][task][1] += int(j.outcome is Outcome.PASS)
    out: dict[str, Any] = {}
    for name in sorted(outcomes):
        counts = outcomes[name]
        groups = [(n, c) for n, c in tasks[name].values()]
        n = sum(g[0] for g in groups)
        c = sum(g[1] for g in groups)
        at, pw, _ = passk_blocks(groups, ks, level) if groups else ({}, {}, {})
        out[name] = {
            "series": judge_reference_set(name),
            "judged": sum(counts.values()),
            "outcomes": dict(sorted(counts.items())),
            "pass_rate": proportion(n, c, level),
            "pass_at_k": at,
            "pass_pow_k": pw,
        }
    return out
