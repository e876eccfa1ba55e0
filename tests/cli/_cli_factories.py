"""Evaluation results built from the real result models, for CLI/report tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tracepass.evaluator.models import (
    ConversationResult,
    ExpectedTool,
    GraderResult,
    Outcome,
    ToolCall,
    ToolCorrectness,
    TrajectoryScores,
    TurnResult,
)
from tracepass.evaluator.offline.evaluation_run import build_document

_GOOD_TRAJ = TrajectoryScores(
    exact=True, in_order=True, any_order=True, precision=1.0, recall=1.0, f1=1.0
)
_BAD_TRAJ = TrajectoryScores(
    exact=False, in_order=False, any_order=False, precision=0.5, recall=0.5, f1=0.5
)


def turn(
    correct: bool,
    *,
    query: str = "What is 15 + 27?",
    judged: bool = False,
    index: int = 0,
) -> TurnResult:
    tc = ToolCorrectness(
        selection=1.0,
        parameters=1.0 if correct else 0.5,
        sequence=1.0,
        utilization=1.0 if correct else 0.0,
        overall=1.0 if correct else 0.625,
        correct=correct,
    )
    graders: tuple[GraderResult, ...] = ()
    if judged:
        graders = (
            GraderResult(
                grader="llm",
                score=0.9 if correct else 0.2,
                passed=correct,
                reasoning="matches" if correct else "wrong number",
            ),
        )
    return TurnResult(
        index=index,
        query=query,
        answer="42" if correct else "<b>41</b>",
        expected_answer="42",
        answer_score=1.0 if correct else 0.0,
        answer_correct=correct,
        graders=graders,
        tool_correctness=tc,
        trajectory=_GOOD_TRAJ if correct else _BAD_TRAJ,
        tool_calls=(ToolCall(name="calculator", arguments={"a": 15, "b": 27 if correct else 26}),),
        expected_tools=(ExpectedTool(name="calculator", arguments={"a": 15, "b": 27}),),
        correct=correct,
    )


def conversation(
    cid: str,
    ref: str | None,
    correct: bool,
    *,
    version: str = "1.0",
    judged: bool = False,
    outcome: Outcome | None = None,
) -> ConversationResult:
    return ConversationResult(
        conversation_id=cid,
        reference_id=ref,
        reference_set="demo",
        agent_name="calc-agent",
        agent_version=version,
        correct=correct,
        outcome=outcome or (Outcome.PASS if correct else Outcome.FAIL),
        turns=(turn(correct, judged=judged),),
        trajectory=_GOOD_TRAJ if correct else _BAD_TRAJ,
    )


def results_doc(
    pattern: dict[str, list[bool]],
    *,
    version: str = "1.0",
    judged: bool = False,
    ks: tuple[int, ...] = (1, 3, 5),
) -> dict[str, Any]:
    """pattern: reference id → per-trial correctness."""
    results = []
    for ref, trials in pattern.items():
        for i, ok in enumerate(trials):
            results.append(
                conversation(f"{ref}-{version}-{i}", ref, ok, version=version, judged=judged)
            )
    return build_document(results, ks)


def write_doc(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path
