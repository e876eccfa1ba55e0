"""A state file written before results were stored as data (its `results` rows hold the
conversation API's view JSON) still loads, and the API answers exactly as it did."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from _pipeline_support import TWO_TURN_VIEWS

from tracepass.collector.api.views import stored_view_json
from tracepass.collector.state import StateStore, StoredResult
from tracepass.collector.state.codec import RESULT_FORMAT, decode_result, encode_result
from tracepass.evaluator.models import (
    Conversation,
    ExpectedTool,
    Outcome,
    Reference,
    ReferenceTurn,
    ToolCall,
    Turn,
)
from tracepass.evaluator.scoring.evaluator import Evaluator

OLD_FILE = Path(__file__).resolve().parents[1] / "data" / "state" / "results_view_format.sqlite"

# What `GET /api/v1/conversations/c1` answered when the file was written (abridged to
# the fields the conversation shape owns; the evaluation is compared in full below).
OLD_TURNS = TWO_TURN_VIEWS


ADDED_RESULT_KEYS = ("policy_id", "policy_outcome", "violations", "judgements")
ADDED_TURN_KEYS = ("violations", "policy_passed", "policy_graders", "policy_error")
# Tokens, cost and latency (docs/cost-latency.md): unknown for rows stored before.
ADDED_FIGURE_KEYS = ("usage", "duration_s", "latency", "spans")
NO_USAGE = {
    "input_tokens": None,
    "output_tokens": None,
    "cached_input_tokens": None,
    "reasoning_tokens": None,
    "cache_write_input_tokens": None,
    "model_calls": 0,
    "cost_usd": None,
    "cost_source": None,
    "missing": {"cost_usd": "recorded before tokens and cost were read"},
}


def _pop_figures(view: dict[str, object]) -> None:
    """Remove the figures added since, checking they say "unknown"."""
    for key in ADDED_FIGURE_KEYS:
        if key in view:
            value = view.pop(key)
            assert value in (None, [], NO_USAGE), (key, value)


def _old_row(path: Path) -> str:
    with sqlite3.connect(path) as conn:
        (text,) = conn.execute("SELECT view FROM results WHERE conv_key='c1'").fetchone()
    return str(text)


def test_rows_in_the_old_view_format_load_and_render_the_same_view(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    shutil.copy(OLD_FILE, path)
    old_view = json.loads(_old_row(path))
    store = StateStore(path)
    store.open()
    try:
        stored = store.results.get_result("c1")
        assert stored is not None
        assert stored.revision == 0
        assert stored.conversation.id == "c1"
        assert stored.result is not None
        assert stored.result.outcome is Outcome.PASS
        view = stored_view_json(stored)
        _pop_figures(view)
        for turn in view["turns"]:
            _pop_figures(turn)
        assert view["turns"] == OLD_TURNS
        # Byte-for-byte the answer the API gave before, plus the fields added since (the
        # policy verdict and violations: docs/references.md "Policies").
        for key in ADDED_RESULT_KEYS:
            assert view["evaluation"].pop(key) in (None, [])
        assert view.pop("judgements") == []  # conversation judges (docs/judges.md)
        for turn in view["evaluation"]["turns"]:
            for key in ADDED_TURN_KEYS:
                assert turn.pop(key) in (None, [])
        assert view == old_view
        # The spans of the old file still recover too.
        assert {c.key for c in store.load()} == {"c1"}
    finally:
        store.close()


def test_new_rows_are_versioned_data_and_round_trip(tmp_path: Path) -> None:
    shutil.copy(OLD_FILE, tmp_path / "state.sqlite")
    legacy = decode_result(_old_row(tmp_path / "state.sqlite"))
    text = encode_result(legacy)
    data = json.loads(text)
    assert data["v"] == RESULT_FORMAT
    assert "evaluation" not in data  # the API's shape is not the file's
    again = decode_result(text)
    assert again == legacy
    assert isinstance(again, StoredResult)


def _evaluated(date: str, *, extra_turn: bool = False) -> StoredResult:
    """A conversation scored by the real evaluator (its result turns share the
    conversation's queries, answers and tool calls, as in `serve`)."""
    reference = Reference(
        id="ref-1",
        turns=(
            ReferenceTurn(
                query="q",
                expected_answer="ok",
                expected_tools=(ExpectedTool(name="search", arguments={"date": "2025-07-01"}),),
            ),
        ),
    )
    turns = [
        Turn(
            query="q",
            answer="ok ünï",
            tool_calls=(ToolCall(name="search", arguments={"date": date}, result=[1, None]),),
            trace_id="aa",
        )
    ]
    if extra_turn:
        turns.append(Turn(query="more?", answer=None))
    conversation = Conversation(id="c1", agent_name="a", trace_ids=("aa",), turns=tuple(turns))
    result = Evaluator().evaluate(conversation, reference, reference_set="s")
    return StoredResult(conversation, result, 2)


def test_results_are_stored_without_the_copy_of_the_conversation_turns() -> None:
    for stored in (_evaluated("2025-07-01"), _evaluated("2025-07-02", extra_turn=True)):
        assert stored.result is not None
        text = encode_result(stored)
        data = json.loads(text)
        assert data["v"] == RESULT_FORMAT == 4
        assert data["turn_io"] == 1
        for turn in data["result"]["turns"]:
            assert not {"query", "answer", "tool_calls"} & set(turn)
        again = decode_result(text)
        assert again == stored
        # Byte-for-byte the same data as a format 2 row (the full document).
        assert again.result is not None
        assert again.result.model_dump_json() == stored.result.model_dump_json()
        old = (
            f'{{"v":2,"revision":2,"conversation":'
            f"{stored.conversation.model_dump_json(exclude_defaults=True)},"
            f'"result":{stored.result.model_dump_json()}}}'
        )
        assert decode_result(old) == stored


def test_a_result_whose_turns_differ_from_its_conversation_is_stored_in_full() -> None:
    stored = _evaluated("2025-07-02")
    assert stored.result is not None
    edited = stored.result.turns[0].model_copy(update={"answer": "something else"})
    odd = StoredResult(
        stored.conversation, stored.result.model_copy(update={"turns": (edited,)}), 0
    )
    data = json.loads(encode_result(odd))
    assert "turn_io" not in data
    assert data["result"]["turns"][0]["answer"] == "something else"
    assert decode_result(encode_result(odd)) == odd
    with pytest.raises(ValueError, match="newer than this collector"):
        decode_result('{"v":5,"revision":0,"conversation":{"id":"c"},"result":null}')
