"""The `tracepass evaluate --format json` contract, checked key by key.

Contract objects whose keys the issue lists in full (the per-k estimate blocks, a
turn's `tool_correctness` and `trajectory`) must have exactly those keys; objects the
document extends with documented extra keys (summary, conversation, turn) must have at
least the contract's keys, each with the contract's type."""

from __future__ import annotations

from typing import Any

SUMMARY_KEYS = {"conversations", "correct", "matched", "unmatched", "pass_at_k", "pass_pow_k", "readiness"}  # fmt: skip
ESTIMATE_KEYS = {"plugin", "unbiased", "mean", "lower", "upper"}
CONVERSATION_KEYS = {"conversation_id", "reference_id", "correct", "turns"}
TURN_KEYS = {"query", "answer", "answer_score", "answer_correct", "tool_correctness", "trajectory", "tool_calls"}  # fmt: skip
TOOL_KEYS = {"selection", "parameters", "sequence", "utilization", "overall", "correct"}
TRAJ_KEYS = {"exact", "in_order", "any_order", "precision", "recall", "f1"}
CALL_KEYS = {"name", "arguments", "result", "error", "call_id"}


def _number_or_null(value: Any) -> bool:
    return value is None or (isinstance(value, int | float) and not isinstance(value, bool))


def assert_contract(doc: dict[str, Any], ks: list[int]) -> None:
    assert set(doc) >= {"summary", "conversations"}
    summary = doc["summary"]
    assert set(summary) >= SUMMARY_KEYS
    for key in ("conversations", "correct", "matched", "unmatched"):
        assert type(summary[key]) is int, key
    assert summary["conversations"] == summary["matched"] + summary["unmatched"]
    assert isinstance(summary["readiness"], dict)
    assert isinstance(summary["readiness"]["tier"], str)
    for metric in ("pass_at_k", "pass_pow_k"):
        assert set(summary[metric]) == {str(k) for k in ks}, metric
        for k, block in summary[metric].items():
            assert set(block) == ESTIMATE_KEYS, (metric, k)
            assert all(_number_or_null(v) for v in block.values()), (metric, k, block)
    assert isinstance(doc["conversations"], list)
    for conv in doc["conversations"]:
        assert set(conv) >= CONVERSATION_KEYS
        assert isinstance(conv["conversation_id"], str)
        assert conv["reference_id"] is None or isinstance(conv["reference_id"], str)
        assert isinstance(conv["correct"], bool)
        assert isinstance(conv["turns"], list)
        for turn in conv["turns"]:
            assert set(turn) >= TURN_KEYS, set(turn)
            assert _number_or_null(turn["answer_score"])
            assert turn["answer_correct"] in (True, False, None)
            tc = turn["tool_correctness"]
            if tc is not None:
                assert set(tc) == TOOL_KEYS
                assert isinstance(tc["correct"], bool)
            # Always an object; every value null when the turn's tools are not checked.
            traj = turn["trajectory"]
            assert isinstance(traj, dict)
            assert set(traj) == TRAJ_KEYS
            if tc is None:
                assert all(v is None for v in traj.values()), traj
            assert isinstance(turn["tool_calls"], list)
            for call in turn["tool_calls"]:
                assert set(call) >= CALL_KEYS
                assert isinstance(call["arguments"], dict)
