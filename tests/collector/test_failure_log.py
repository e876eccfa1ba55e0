"""The failure log line: one per fail/error result, logfmt, searchable fields."""

from __future__ import annotations

import logging

import pytest

from tracepass.collector.export.failure_log import log_failure, logfmt
from tracepass.evaluator.models import (
    Conversation,
    ConversationResult,
    ExpectedTool,
    Outcome,
    Reference,
    ReferenceTurn,
    ToolCall,
    Turn,
)
from tracepass.evaluator.scoring.evaluator import Evaluator

REFERENCE = Reference(
    id="ref-1",
    turns=(
        ReferenceTurn(
            query="q",
            expected_tools=(ExpectedTool(name="search", arguments={"date": "2025-07-01"}),),
        ),
    ),
)


def _conv(date: str) -> Conversation:
    return Conversation(
        id="c 1",
        agent_name="travel",
        agent_version="1.1",
        trace_ids=("aa", "bb"),
        turns=(
            Turn(
                query="q",
                answer="a",
                tool_calls=(ToolCall(name="search", arguments={"date": date}),),
            ),
        ),
    )


def test_a_failing_conversation_logs_one_logfmt_line(caplog: pytest.LogCaptureFixture) -> None:
    conv = _conv("2025-07-02")
    result = Evaluator().evaluate(conv, REFERENCE, reference_set="s")
    assert result.outcome is Outcome.FAIL
    with caplog.at_level(logging.INFO, logger="tracepass.failures"):
        assert log_failure(result, conv, 0)
    (record,) = caplog.records
    assert record.getMessage() == (
        'conversation_failed conversation_id="c 1" agent_name=travel agent_version=1.1 '
        "reference_set=s reference_id=ref-1 outcome=fail revision=0 "
        "reasons=\"turn 1: search.date: expected '2025-07-01', got '2025-07-02'\" "
        "trace_ids=aa,bb"
    )
    assert record.tracepass["outcome"] == "fail"  # type: ignore[attr-defined]


def test_passing_and_unscored_conversations_are_not_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    conv = _conv("2025-07-01")
    passing = Evaluator().evaluate(conv, REFERENCE)
    unscored = Evaluator().evaluate(conv, None)
    with caplog.at_level(logging.INFO, logger="tracepass.failures"):
        assert not log_failure(passing, conv, 0)
        assert not log_failure(unscored, conv, 0)
    assert caplog.records == []


def test_errored_results_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    result = ConversationResult(
        conversation_id="e", reference_id="r", correct=False, outcome=Outcome.ERROR
    )
    with caplog.at_level(logging.INFO, logger="tracepass.failures"):
        assert log_failure(result, None, 2)
    assert 'outcome=error revision=2 reasons=error trace_ids=""' in caplog.records[0].getMessage()


def test_logfmt_quotes_only_when_needed() -> None:
    assert (
        logfmt("e", {"a": "x", "b": "y z", "c": None, "d": 'q"'}) == 'e a=x b="y z" c="" d="q\\""'
    )
