"""What one evaluation puts into the rolling windows, as a small value of its own.

`EvaluationMetrics` adds every evaluation to the windows through a `WindowEntry`, and the
state file's window journal stores the same entry (`encode_entry`, a JSON array of a few
short strings) instead of a second copy of the whole `ConversationResult`: the journal
exists only to put evaluations made since the last snapshot of the windows back into
them after a crash, and this is all the windows ever read of a result. Journalling the
entry costs a tenth of dumping the result, and recovery replays it through the same
code path as the live `record`, so the windows come back identical.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from tracepass.collector.export.outcomes import result_success, turn_outcome, violation_tally
from tracepass.evaluator.models import ConversationResult

__all__ = [
    "UNMATCHED_TASK",
    "WindowEntry",
    "decode_entries",
    "decode_entry",
    "encode_entry",
    "entry_tag",
    "task_of",
    "turn_tally",
    "window_entry",
]

UNMATCHED_TASK = "_unmatched"

# One encoder each, reused (json.dumps with options builds a new encoder per call). The
# tag keeps json.dumps' default ASCII escaping: it is compared as a string.
_TAG = json.JSONEncoder(separators=(",", ":")).encode
_ENTRY = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def task_of(result: ConversationResult) -> str:
    """The pass@k task: the reference; for a conversation scored by its agent's policy
    alone, the policy (every such conversation is one trial of the same task, the
    agent version's behaviour under the policy: docs/statistics.md)."""
    if result.reference_id is not None:
        return result.reference_id
    if result.policy_id is not None:
        return result.reference_set or UNMATCHED_TASK
    return UNMATCHED_TASK


@dataclass(frozen=True, slots=True)
class WindowEntry:
    """One evaluation as the rolling windows see it. The agent fields are the result's
    own values (the label limiter applies when the entry is added, as for a live
    result); `tag` is the outcome, turn tally and violation tally that a later revision
    of the conversation subtracts as superseded."""

    conversation_id: str
    agent_name: str | None
    agent_version: str | None
    reference_set: str | None
    task: str
    success: bool | None
    tag: str


# Tags by (outcome, turn tally, None, rule tally): few distinct ones exist.
_TAGS: dict[tuple[object, ...], str] = {}
_TAG_CACHE_LIMIT = 4096  # cleared when full (bounded memory)


def entry_tag(outcome: str, turn_tally: dict[str, int], violations: dict[str, int]) -> str:
    """The window entry's tag: `[outcome, turn tally]` or, with violations,
    `[outcome, turn tally, rule tally]` as compact JSON (what a later revision reads back
    to count as superseded, and what the state file keeps). Cached."""
    cache_key = (outcome, *turn_tally.items(), None, *violations.items())
    tag = _TAGS.get(cache_key)
    if tag is None:
        tag_parts: list[object] = [outcome, turn_tally]
        if violations:
            tag_parts.append(violations)
        tag = _TAG(tag_parts)
        if len(_TAGS) >= _TAG_CACHE_LIMIT:
            _TAGS.clear()
        _TAGS[cache_key] = tag
    return tag


def turn_tally(outcomes: list[str]) -> dict[str, int]:
    """outcome → turns, in first-seen order (what `collections.Counter` gave)."""
    tally: dict[str, int] = {}
    for outcome in outcomes:
        tally[outcome] = tally.get(outcome, 0) + 1
    return tally


def window_entry(result: ConversationResult, *, tag: str | None = None) -> WindowEntry:
    """The entry of `result`. `tag`: its tag when the caller already has it, else
    built here (`entry_tag`)."""
    if tag is None:
        tag = entry_tag(
            result.outcome.value,
            turn_tally([turn_outcome(t) for t in result.turns]),
            violation_tally(result),
        )
    return WindowEntry(
        result.conversation_id,
        result.agent_name,
        result.agent_version,
        result.reference_set,
        task_of(result),
        result_success(result),
        tag,
    )


def encode_entry(entry: WindowEntry) -> str:
    return _ENTRY(
        [
            entry.conversation_id,
            entry.agent_name,
            entry.agent_version,
            entry.reference_set,
            entry.task,
            entry.success,
            entry.tag,
        ]
    )


def decode_entries(text: str) -> list[WindowEntry]:
    """The entries of one journal row: one entry, or (a result with judgements) an
    array of entries. Raises ValueError like `decode_entry`."""
    if text.startswith("[["):
        try:
            items = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"window entry: not JSON: {exc}") from None
        return [decode_entry(_ENTRY(item)) for item in items]
    return [decode_entry(text)]


def _opt_str(value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ValueError(f"window entry: expected a string or null, got {value!r}")


def decode_entry(text: str) -> WindowEntry:
    """Raises ValueError ("window entry: ...") for anything `encode_entry` did not write."""
    try:
        fields = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"window entry: not JSON: {exc}") from None
    if not isinstance(fields, list) or len(fields) != 7:
        raise ValueError("window entry: not a JSON array of 7 fields")
    cid, name, version, ref_set, task, success, tag = fields
    if not isinstance(cid, str) or not isinstance(task, str) or not isinstance(tag, str):
        raise ValueError("window entry: conversation id, task and tag must be strings")
    if success is not None and not isinstance(success, bool):
        raise ValueError(f"window entry: success must be true, false or null, got {success!r}")
    return WindowEntry(
        cid, _opt_str(name), _opt_str(version), _opt_str(ref_set), task, success, tag
    )
