"""One log line per failing or errored conversation, so a log store (Loki, Elastic) can
search failures by agent, version, reference or trace id without the collector's API.

The line is logfmt (`key=value`, values quoted when they hold spaces or quotes) on the
`tracepass.failures` logger at INFO, e.g.

    conversation_failed conversation_id=bad-29 agent_name=travel-assistant
    agent_version=1.1 reference_set=travel-flights reference_id=flights-oslo-rome-budget
    outcome=fail revision=0 reasons="turn 1: search_flights.date: expected '2025-07-01',
    got '2025-07-02' | turn 1: answer incorrect (contains 0.00)" trace_ids=452b…,1a20…

(one line; wrapped here). The same fields ride on the record as `extra["tracepass"]` for
JSON log formatters. Passing, unscored and incomplete results are not logged: the line
is for "this conversation went wrong", and incomplete ones are eviction noise.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from tracepass.evaluator.models import Conversation, ConversationResult, Outcome
from tracepass.evaluator.scoring.explain import failure_reasons

__all__ = ["FAILURE_EVENT", "LOGGED_OUTCOMES", "failure_fields", "log_failure", "logfmt"]

log = logging.getLogger("tracepass.failures")

FAILURE_EVENT = "conversation_failed"
LOGGED_OUTCOMES = frozenset({Outcome.FAIL, Outcome.ERROR})
MAX_REASONS = 3


def failure_fields(
    result: ConversationResult, conversation: Conversation | None, revision: int
) -> dict[str, Any]:
    return {
        "conversation_id": result.conversation_id,
        "agent_name": result.agent_name,
        "agent_version": result.agent_version,
        "reference_set": result.reference_set,
        "reference_id": result.reference_id,
        "outcome": result.outcome.value,
        "revision": revision,
        "reasons": failure_reasons(result, limit=MAX_REASONS),
        "trace_ids": list(conversation.trace_ids) if conversation is not None else [],
    }


def _value(value: Any) -> str:
    if value is None:
        return '""'
    if isinstance(value, list):
        value = (" | " if any("," in str(v) or " " in str(v) for v in value) else ",").join(
            str(v) for v in value
        )
    text = str(value)
    if not text or any(c in text for c in ' "=\\\n\t'):
        return json.dumps(text, ensure_ascii=False)
    return text


def logfmt(event: str, fields: dict[str, Any]) -> str:
    return " ".join([event, *(f"{k}={_value(v)}" for k, v in fields.items())])


def log_failure(
    result: ConversationResult, conversation: Conversation | None, revision: int
) -> bool:
    """Log `result` if it failed or errored; returns whether a line was written."""
    if result.outcome not in LOGGED_OUTCOMES or not log.isEnabledFor(logging.INFO):
        return False
    fields = failure_fields(result, conversation, revision)
    log.info(logfmt(FAILURE_EVENT, fields), extra={"tracepass": fields})
    return True
