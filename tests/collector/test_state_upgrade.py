"""A state file written before results were stored as data (its `results` rows hold the
conversation API's view JSON) still loads, and the API answers exactly as it did."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

from _pipeline_support import TWO_TURN_VIEWS

from tracepass.collector.api.views import stored_view_json
from tracepass.collector.state import StateStore, StoredResult
from tracepass.collector.state.codec import RESULT_FORMAT, decode_result, encode_result
from tracepass.evaluator.models import Outcome

OLD_FILE = Path(__file__).resolve().parents[1] / "data" / "state" / "results_view_format.sqlite"

# What `GET /api/v1/conversations/c1` answered when the file was written (abridged to
# the fields the conversation shape owns; the evaluation is compared in full below).
OLD_TURNS = TWO_TURN_VIEWS


ADDED_RESULT_KEYS = ("policy_id", "policy_outcome", "violations")
ADDED_TURN_KEYS = ("violations", "policy_passed", "policy_graders", "policy_error")


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
        stored = store.get_result("c1")
        assert stored is not None
        assert stored.revision == 0
        assert stored.conversation.id == "c1"
        assert stored.result is not None
        assert stored.result.outcome is Outcome.PASS
        view = stored_view_json(stored)
        assert view["turns"] == OLD_TURNS
        # Byte-for-byte the answer the API gave before, plus the fields added since (the
        # policy verdict and violations: docs/references.md "Policies").
        for key in ADDED_RESULT_KEYS:
            assert view["evaluation"].pop(key) in (None, [])
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
