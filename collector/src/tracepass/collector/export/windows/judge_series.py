"""Conversation judges' verdicts as trials of their own series.

A judgement (`ConversationResult.judgements`, docs/judges.md) is one trial of the series
`reference_set="judge:<name>"` of the conversation's agent and version: counted in
`tracepass_conversations{outcome}`, added to the rolling windows (pass@k / pass^k,
CUSUM, readiness) and made the exemplar of that series, exactly like a scored
conversation. Its pass@k task is the conversation's reference when it matched one, else
the series itself (every conversation of the agent version is a trial of one task, as
for policies: docs/statistics.md). `error` and `skipped_budget` judgements are counted
but are no evidence either way (not in n).

The rolling windows know each entry by a conversation id, across every series (a
revision may move a conversation to another series); a judgement's entry is therefore
known as `<conversation id>|judge:<name>`, so it never replaces the conversation's own
entry, and a later revision's judgement replaces the earlier one of the same judge.

The window journal holds these entries next to the result's own (`journal_entries`), so
crash recovery rebuilds the judge series too.
"""

from __future__ import annotations

import json

from tracepass.collector.export.outcomes import success_of
from tracepass.collector.export.windows.window_entry import WindowEntry, encode_entry, window_entry
from tracepass.evaluator.judge.conversation_judges import judge_reference_set
from tracepass.evaluator.models import ConversationResult

__all__ = ["journal_entries", "journal_entry", "judgement_entries"]

_TAG = json.JSONEncoder(separators=(",", ":")).encode


def trial_id(conversation_id: str, series: str) -> str:
    """The windows' id of a judgement's trial (distinct from the conversation's own)."""
    return conversation_id + "|" + series


def judgement_entries(result: ConversationResult) -> list[WindowEntry]:
    """One window entry per judgement of `result` (its tag: `[outcome, {}]`, no turns)."""
    out = []
    for j in result.judgements:
        series = judge_reference_set(j.name)
        out.append(
            WindowEntry(
                trial_id(result.conversation_id, series),
                result.agent_name,
                result.agent_version,
                series,
                result.reference_id if result.reference_id is not None else series,
                success_of(j.outcome),
                _TAG([j.outcome.value, {}]),
            )
        )
    return out


def journal_entries(result: ConversationResult) -> list[WindowEntry]:
    """Everything `record` adds to the windows for `result`: its entry, then its
    judgements'."""
    return [window_entry(result), *judgement_entries(result)]


def journal_entry(result: ConversationResult) -> str:
    """What the state file's window journal stores for `result` (`encode_entry`); with
    conversation judges' verdicts, a JSON array of every entry (`decode_entries`)."""
    if not result.judgements:
        return encode_entry(window_entry(result))
    return "[" + ",".join(encode_entry(e) for e in journal_entries(result)) + "]"
