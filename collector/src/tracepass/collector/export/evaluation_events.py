"""`gen_ai.evaluation.result` log events (OpenTelemetry GenAI semantic conventions), one
per graded aspect of a turn plus one per conversation, each parented to the evaluated
span when its ids are known."""

from __future__ import annotations

from typing import Any

from opentelemetry import trace
from opentelemetry._logs import Logger, SeverityNumber

from tracepass.collector.export.outcomes import result_success, turn_outcome
from tracepass.evaluator.models import Conversation, ConversationResult
from tracepass.instrumentation import semconv as sc

__all__ = ["EVENT_NAME", "EvaluationEvents"]

EVENT_NAME = "gen_ai.evaluation.result"


class EvaluationEvents:
    """Emits the events of one evaluated conversation through an OTel `Logger`."""

    def __init__(self, logger: Logger) -> None:
        self._logger = logger

    def emit(
        self,
        result: ConversationResult,
        labels: dict[str, str],
        revision: int,
        conversation: Conversation | None,
    ) -> None:
        base: dict[str, Any] = {
            "gen_ai.conversation.id": result.conversation_id,
            "tracepass.revision": revision,
            "tracepass.reference_set": labels["reference_set"],
        }
        if result.agent_name:
            base["gen_ai.agent.name"] = result.agent_name
        if result.agent_version:
            base["gen_ai.agent.version"] = result.agent_version
        if result.reference_id:
            base[sc.REFERENCE_ID] = result.reference_id
        turns = conversation.turns if conversation is not None else ()
        for turn in result.turns:
            ctx = None
            if turn.index < len(turns):
                ctx = _span_context(turns[turn.index].trace_id, turns[turn.index].span_id)
            attrs = {**base, "tracepass.turn.index": turn.index}
            # Only answers that were graded (or whose grading failed): a turn without
            # an answer check, or without a reference turn, has no answer verdict.
            if turn.answer_correct is not None or turn.answer_error is not None:
                reasoning = next((g.reasoning for g in turn.graders if g.reasoning), None)
                self._event(
                    "answer_correctness",
                    turn.answer_score,
                    "error"
                    if turn.answer_correct is None
                    else ("pass" if turn.answer_correct else "fail"),
                    turn.answer_error or reasoning,
                    attrs,
                    ctx,
                )
            if turn.tool_correctness is not None:
                tc = turn.tool_correctness
                self._event(
                    "tool_correctness",
                    tc.overall,
                    "pass" if tc.correct else "fail",
                    f"selection={tc.selection:.3g} parameters={tc.parameters:.3g} "
                    f"sequence={tc.sequence:.3g} utilization={tc.utilization:.3g}",
                    attrs,
                    ctx,
                )
            tj = turn.trajectory
            if tj is not None:
                self._event(
                    "trajectory_f1",
                    tj.f1,
                    "exact" if tj.exact else "mismatch",
                    f"precision={tj.precision:.3g} recall={tj.recall:.3g}",
                    attrs,
                    ctx,
                )
            self._event("turn_correctness", None, turn_outcome(turn), None, attrs, ctx)
        first = _span_context(turns[0].trace_id, turns[0].span_id) if turns else None
        # A score only for outcomes that are evidence about the agent (as in the
        # windows); error and unscored carry their label alone, never a 0.
        evidence = result_success(result)
        self._event(
            "conversation_correctness",
            None if evidence is None else float(evidence),
            result.outcome.value,
            None,
            base,
            first,
        )

    def _event(
        self,
        name: str,
        score: float | None,
        label: str | None,
        explanation: str | None,
        attrs: dict[str, Any],
        ctx: Any,
    ) -> None:
        a = {**attrs, "gen_ai.evaluation.name": name}
        if score is not None:
            a["gen_ai.evaluation.score.value"] = float(score)
        if label is not None:
            a["gen_ai.evaluation.score.label"] = label
        if explanation:
            a["gen_ai.evaluation.explanation"] = explanation
        self._logger.emit(
            event_name=EVENT_NAME,
            severity_number=SeverityNumber.INFO,
            attributes=a,
            context=ctx,
        )


def _span_context(trace_id: str | None, span_id: str | None) -> Any:
    """A context whose current span is the evaluated one, so the event is parented to
    it (the semconv asks for that); None when ids are missing or malformed."""
    if not trace_id or not span_id:
        return None
    try:
        tid, sid = int(trace_id, 16), int(span_id, 16)
    except ValueError:
        return None
    if tid == 0 or sid == 0:
        return None
    sc = trace.SpanContext(
        trace_id=tid,
        span_id=sid,
        is_remote=True,
        trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED),
    )
    return trace.set_span_in_context(trace.NonRecordingSpan(sc))
