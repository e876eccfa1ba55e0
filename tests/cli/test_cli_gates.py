"""Gate parsing/evaluation and pairwise-verdict parsing (pure functions)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult

from tracepass.evaluator.offline.gates import (
    Gate,
    GateError,
    GateOn,
    check_gates,
    parse_gate,
    point_estimate,
    valid_metrics,
)
from tracepass.evaluator.offline.pairwise import (
    PairItem,
    combine,
    judge_pairs,
    tally,
    verdict_of,
)


def test_parse_gate_forms() -> None:
    assert parse_gate("pass_pow_k@3=0.8", [1, 3]) == Gate("pass_pow_k", 3, 0.8)
    assert parse_gate(" tool_correctness = 0.9 ", [1]) == Gate("tool_correctness", None, 0.9)
    assert parse_gate("pass_at_k@1=1", [1]).label == "pass_at_k@1"
    with pytest.raises(GateError, match="unknown metric"):
        parse_gate("tool_correctness@3=0.9", [3])
    with pytest.raises(GateError, match="expected METRIC=VALUE"):
        parse_gate("pass_at_k@1", [1])
    with pytest.raises(GateError, match="is not an integer"):
        parse_gate("pass_at_k@x=0.5", [1])
    assert "pass_pow_k@5" in valid_metrics([1, 5])


def test_point_estimate_prefers_unbiased() -> None:
    assert point_estimate({"unbiased": 0.5, "plugin": 0.4}) == (0.5, "unbiased")
    assert point_estimate({"unbiased": None, "plugin": 0.4}) == (0.4, "plugin")
    assert point_estimate({}) == (None, "none")


def test_check_gates_point_lower_and_no_data() -> None:
    summary: dict[str, Any] = {
        "pass_pow_k": {
            "3": {"plugin": 0.9, "unbiased": None, "mean": 0.85, "lower": 0.6, "upper": 0.97}
        },
        "tool_correctness": {"rate": 0.9, "lower": 0.7},
        "answer_correctness": {"rate": None, "lower": None},
    }
    gates = [Gate("pass_pow_k", 3, 0.8), Gate("tool_correctness", None, 0.9)]
    point = check_gates(summary, gates, GateOn.POINT)
    assert [o.passed for o in point] == [True, True]  # 0.9 >= 0.9 within tolerance
    assert point[0].estimator == "plugin"
    lower = check_gates(summary, gates, GateOn.LOWER)
    assert [o.passed for o in lower] == [False, False]
    (missing,) = check_gates(summary, [Gate("answer_correctness", None, 0.0)])
    assert missing.passed is False  # no evidence never passes
    assert missing.value is None


def test_verdict_of_score_and_combine() -> None:
    assert verdict_of(1.0) == "A"
    assert verdict_of(0.5) == "tie"
    assert verdict_of(0.0) == "B"
    assert combine("B", "A") == "candidate"
    assert combine("A", "B") == "base"
    assert combine("A", "A") == "tie"  # position bias cancels
    assert combine("tie", "A") == "tie"


class Broken(BaseChatModel):
    @property
    def _llm_type(self) -> str:
        return "broken"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        raise ConnectionError("judge unreachable")


def test_judge_failure_is_an_error_not_a_verdict() -> None:
    item = PairItem("r", 0, "q", None, "a", "b")
    results = asyncio.run(judge_pairs(Broken(), [item]))
    assert results[0].winner == "error"
    assert "ConnectionError: judge unreachable" in (results[0].error or "")
    assert tally(results) == {"base": 0, "candidate": 0, "tie": 0, "error": 1}


def test_judge_module_is_imported_from_the_working_directory(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from tracepass.collector.app.cli.common import load_chat_model

    (tmp_path / "tp_cwd_judges.py").write_text(
        "from langchain_core.language_models.fake_chat_models import FakeListChatModel\n"
        "def make():\n"
        "    return FakeListChatModel(responses=['{\"score\": 0.5}'])\n",
        encoding="utf-8",
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    model = load_chat_model("tp_cwd_judges:make")
    assert isinstance(model, BaseChatModel)


@pytest.mark.parametrize(
    ("groups", "tier", "passed"),
    [
        ([(40, 40)], "production_ready", True),
        ([(5, 5)], "inconclusive", True),
        ([(40, 10)], "needs_improvement", False),
        ([], "insufficient_data", True),
    ],
)
def test_without_fail_under_the_readiness_rule_gates(
    groups: list[tuple[int, int]], tier: str, passed: bool
) -> None:
    """No --fail-under: the readiness gate fails exactly on "needs improvement" (the
    alert's condition); explicit gates replace it; --no-readiness-gate drops it."""
    from tracepass.evaluator.offline.evaluation_run import readiness_line, readiness_verdict
    from tracepass.evaluator.offline.gates import gate_run

    summary = {"readiness": readiness_verdict(groups), "conversation_correctness": {"rate": 1.0}}
    assert summary["readiness"]["tier"] == tier
    (outcome,) = gate_run(summary, [])
    assert outcome.passed is passed
    assert outcome.describe() == readiness_line(summary["readiness"])
    assert outcome.as_json()["metric"] == "pass_pow_k@3"
    assert outcome.as_json()["estimator"] == "readiness"
    assert outcome.value == summary["readiness"]["upper"]
    assert gate_run(summary, [], readiness_default=False) == []
    explicit = gate_run(summary, [Gate("conversation_correctness", None, 0.5)])
    assert [o.gate.metric for o in explicit] == ["conversation_correctness"]
