"""The list API over a real SQLite state file: filters, order, cursor pagination, the
schema upgrade of a version-2 file, per-reference summaries, and the failure reasons."""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tracepass.collector.api.params import ParamError, parse_time
from tracepass.collector.api.read_model import ReadModel
from tracepass.collector.state import StateStore, StoredResult
from tracepass.collector.state.store import SCHEMA_VERSION
from tracepass.evaluator.models import (
    Conversation,
    ExpectedTool,
    Reference,
    ReferenceTurn,
    ToolCall,
    Turn,
    Violation,
)
from tracepass.evaluator.scoring.evaluator import Evaluator
from tracepass.evaluator.scoring.explain import failure_reasons, natural_key, trajectory_rows
from tracepass.evaluator.stats.rolling import RollingConfig

OLD_FILE = Path(__file__).resolve().parents[1] / "data" / "state" / "results_view_format.sqlite"
T0 = 1_700_000_000.0

REFERENCE = Reference(
    id="weather-7",
    turns=(
        ReferenceTurn(
            query="weather in Paris?",
            expected_answer="sunny",
            expected_tools=(
                ExpectedTool(name="geocode", arguments={"city": "Paris"}),
                ExpectedTool(name="forecast", arguments={"days": 1}),
            ),
        ),
    ),
)


def _conversation(
    cid: str, version: str, *, city: str = "Paris", answer: str = "sunny"
) -> Conversation:
    return Conversation(
        id=cid,
        agent_name="travel",
        agent_version=version,
        trace_ids=(f"{cid:0>32}"[-32:],),
        turns=(
            Turn(
                query="weather in Paris?",
                answer=answer,
                tool_calls=(
                    ToolCall(name="geocode", arguments={"city": city}),
                    ToolCall(name="forecast", arguments={"days": 1}),
                ),
            ),
        ),
    )


def _store_results(path: Path, specs: list[tuple[str, str, str, float]]) -> StateStore:
    """specs: (conversation id, version, city, completed_at)."""
    store = StateStore(path)
    store.open()
    evaluator = Evaluator()

    async def put_all() -> None:
        for cid, version, city, at in specs:
            conv = _conversation(cid, version, city=city)
            result = evaluator.evaluate(conv, REFERENCE, reference_set="travel-refs")
            await store.put_result(
                cid,
                revision=0,
                closed_at=at,
                n_spans=3,
                stored=StoredResult(conv, result, 0),
                evaluated_at=at,
            )

    asyncio.run(put_all())
    return store


def _model(store: StateStore, now: float = T0 + 1000) -> ReadModel:
    return ReadModel(store, list, RollingConfig(windows=(("1h", 3600.0),)), clock=lambda: now)


@pytest.fixture
def store(tmp_path: Path) -> Any:
    specs = []
    for i in range(30):
        version = "1.0" if i % 2 == 0 else "1.1"
        city = "Lyon" if version == "1.1" and i % 3 == 0 else "Paris"
        specs.append((f"demo-{i}", version, city, T0 + i))
    s = _store_results(tmp_path / "state.sqlite", specs)
    yield s
    s.close()


def test_list_is_newest_first_with_the_contract_fields(store: StateStore) -> None:
    body = _model(store).conversations({"limit": "5"})
    assert set(body) == {"conversations", "next_cursor"}
    first = body["conversations"][0]
    assert set(first) == {
        "conversation_id", "agent_name", "agent_version", "reference_set", "reference_id",
        "outcome", "revision", "completed_at", "turns", "failed_turns", "reasons", "trace_ids",
        "cost_usd", "duration_s",
    }  # fmt: skip
    assert [c["conversation_id"] for c in body["conversations"]] == [
        f"demo-{i}" for i in (29, 28, 27, 26, 25)
    ]
    assert first["completed_at"] == "2023-11-14T22:13:49.000Z"
    assert first["reference_set"] == "travel-refs"
    assert first["reference_id"] == "weather-7"
    assert first["turns"] == 1


def test_filters_select_exactly_the_matching_rows(store: StateStore) -> None:
    model = _model(store)
    failing = model.conversations({"outcome": "fail", "limit": "500"})["conversations"]
    expected = {f"demo-{i}" for i in range(30) if i % 2 == 1 and i % 3 == 0}
    assert {c["conversation_id"] for c in failing} == expected
    for c in failing:
        assert c["agent_version"] == "1.1"
        assert c["failed_turns"] == 1
        assert c["reasons"] == ["turn 1: geocode.city: expected 'Paris', got 'Lyon'"]
    v10 = model.conversations({"agent_name": "travel", "agent_version": "1.0", "limit": "500"})
    assert len(v10["conversations"]) == 15
    assert {c["outcome"] for c in v10["conversations"]} == {"pass"}
    assert model.conversations({"agent_version": "9.9"})["conversations"] == []
    assert model.conversations({"reference_id": "nope"})["conversations"] == []
    ref = model.conversations({"reference_id": "weather-7", "reference_set": "travel-refs"})
    assert len(ref["conversations"]) == 30
    window = model.conversations({"since": str(T0 + 10), "until": str(T0 + 20), "limit": "500"})
    assert [c["conversation_id"] for c in window["conversations"]] == [
        f"demo-{i}" for i in range(19, 9, -1)
    ]
    several = model.conversations({"outcome": "fail,pass", "limit": "500"})
    assert len(several["conversations"]) == 30


def test_cursor_pages_cover_every_row_once(store: StateStore) -> None:
    model = _model(store)
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        params = {"limit": "7", **({"cursor": cursor} if cursor else {})}
        body = model.conversations(params)
        seen.extend(c["conversation_id"] for c in body["conversations"])
        pages += 1
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert pages == 5
    assert seen == [f"demo-{i}" for i in range(29, -1, -1)]


def test_bad_parameters_name_the_parameter(store: StateStore) -> None:
    model = _model(store)
    for params, name in (
        ({"outcome": "broken"}, "outcome"),
        ({"limit": "0"}, "limit"),
        ({"limit": "x"}, "limit"),
        ({"cursor": "!!"}, "cursor"),
        ({"since": "yesterday"}, "since"),
    ):
        with pytest.raises(ParamError) as info:
            model.conversations(params)
        assert info.value.parameter == name


def test_times_parse_as_epoch_rfc3339_or_duration() -> None:
    assert parse_time("since", "2023-11-14T22:13:20Z") == T0
    assert parse_time("since", str(T0)) == T0
    assert parse_time("since", "1h", now=lambda: T0) == T0 - 3600


def test_violation_filter_reads_the_violations_table(store: StateStore, tmp_path: Path) -> None:
    # Results with policy violations come from another branch's model; the table is what
    # the filter reads, so fill it as `write_violations` does and query through the API.
    with sqlite3.connect(store.path) as conn:
        conn.execute(
            "INSERT INTO result_violations VALUES ('forbidden_tool', 'demo-3', ?, 'fail')",
            (T0 + 3,),
        )
    model = _model(store)
    rows = model.conversations({"violation": "forbidden_tool"})["conversations"]
    assert [r["conversation_id"] for r in rows] == ["demo-3"]
    assert model.conversations({"violation": "order"})["conversations"] == []


def test_reference_summary_compares_with_the_baseline(store: StateStore) -> None:
    body = _model(store).reference_summary(
        {"agent_name": "travel", "agent_version": "1.1", "baseline_version": "1.0", "window": "1h"}
    )
    (row,) = body["references"]
    assert row["reference_id"] == "weather-7"
    assert (row["trials"], row["passes"]) == (15, 10)
    assert (row["baseline"]["trials"], row["baseline"]["passes"]) == (15, 15)
    # Uniform prior: Beta(11, 6) mean 11/17; Beta(16, 1) mean 16/17.
    assert row["pass_at_1"]["mean"] == pytest.approx(11 / 17)
    assert row["baseline"]["pass_at_1"]["mean"] == pytest.approx(16 / 17)
    assert row["delta"] == pytest.approx(11 / 17 - 16 / 17)
    lo, hi = row["pass_at_1"]["lower"], row["pass_at_1"]["upper"]
    assert 0 < lo < 11 / 17 < hi < 1
    with pytest.raises(ParamError):
        _model(store).reference_summary({"window": "5y"})


def test_a_version_2_state_file_is_upgraded_and_listed(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    shutil.copy(OLD_FILE, path)
    store = StateStore(path)
    store.open()
    try:
        rows = _model(store).conversations({})["conversations"]
        assert [r["conversation_id"] for r in rows] == ["c1"]
        assert rows[0]["outcome"] == "pass"
        assert rows[0]["turns"] == 2
        with sqlite3.connect(path) as conn:
            (version,) = conn.execute(
                "SELECT value FROM meta WHERE key='schema_version'"
            ).fetchone()
        assert version == str(SCHEMA_VERSION)
    finally:
        store.close()


def test_trajectory_rows_show_missing_extra_out_of_order_and_the_differing_value() -> None:
    expected = (
        ExpectedTool(name="a", arguments={"x": 1}),
        ExpectedTool(name="b", arguments={"city": "Paris"}),
        ExpectedTool(name="c"),
    )
    calls = (
        ToolCall(name="b", arguments={"city": "Lyon"}),
        ToolCall(name="a", arguments={"x": 1}),
        ToolCall(name="z"),
    )
    rows = trajectory_rows(calls, expected)
    statuses = [(r.status, (r.actual or r.expected).name) for r in rows]  # type: ignore[union-attr]
    assert statuses == [("arguments", "b"), ("match", "a"), ("extra", "z"), ("missing", "c")]
    assert [r.out_of_order for r in rows[:2]].count(True) == 1
    (diff,) = rows[0].diffs
    assert (diff.key, diff.expected, diff.actual) == ("city", "Paris", "Lyon")


def test_failure_reasons_are_short_and_name_the_argument() -> None:
    conv = _conversation("x", "1.1", city="Lyon", answer="rain")
    result = Evaluator().evaluate(conv, REFERENCE)
    reasons = failure_reasons(result)
    assert reasons[0] == "turn 1: geocode.city: expected 'Paris', got 'Lyon'"
    assert reasons[1].startswith("turn 1: answer incorrect")
    assert failure_reasons(Evaluator().evaluate(_conversation("y", "1.0"), REFERENCE)) == []


def test_natural_sort() -> None:
    ids = ["demo-0-199", "demo-0-20", "demo-0-3"]
    assert sorted(ids, key=natural_key) == ["demo-0-3", "demo-0-20", "demo-0-199"]


def test_violation_rules_of_a_result_are_indexed_and_filterable(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "state.sqlite")
    store.open()
    try:
        conv = _conversation("p-1", "1.1", city="Lyon")
        base = Evaluator().evaluate(conv, REFERENCE, reference_set="travel-refs")
        result = base.model_copy(
            update={
                "violations": (
                    Violation(
                        rule="forbidden_tool", turn=0, tool_call=0, message="called delete_account"
                    ),
                    Violation(rule="order", turn=0, tool_call=1, message="book before search"),
                    Violation(rule="forbidden_tool", turn=0, tool_call=2, message="again"),
                )
            }
        )
        asyncio.run(
            store.put_result(
                "p-1", revision=0, closed_at=T0, n_spans=3,
                stored=StoredResult(conv, result, 0), evaluated_at=T0,
            )
        )  # fmt: skip
        model = _model(store)
        for rule in ("forbidden_tool", "order"):
            rows = model.conversations({"violation": rule})["conversations"]
            assert [r["conversation_id"] for r in rows] == ["p-1"]
            assert "violation forbidden_tool: called delete_account" in rows[0]["reasons"]
        assert model.conversations({"violation": "max_tool_calls"})["conversations"] == []
        with sqlite3.connect(store.path) as conn:
            rules = sorted(r for (r,) in conn.execute("SELECT rule FROM result_violations"))
        assert rules == ["forbidden_tool", "order"]
    finally:
        store.close()


def test_every_filter_combination_pages_like_brute_force(tmp_path: Path) -> None:
    """Pages (several outcomes merged, violation rows driving, cursors) equal filtering
    and sorting every stored row in Python."""
    specs = []
    for i in range(40):
        version = ("1.0", "1.1", "1.2")[i % 3]
        city = "Lyon" if i % 4 == 0 else "Paris"
        # Ties on completion time: ordered by id, and cursors must not skip them.
        specs.append((f"c-{i:02d}", version, city, T0 + i // 3))
    store = _store_results(tmp_path / "state.sqlite", specs)
    try:
        with sqlite3.connect(store.path) as conn:
            for cid, _, city, at in specs[::5]:
                outcome = "fail" if city == "Lyon" else "pass"
                conn.execute(
                    "INSERT INTO result_violations VALUES ('order', ?, ?, ?)", (cid, at, outcome)
                )
        truth = {
            cid: {
                "agent_version": version,
                "outcome": "fail" if city == "Lyon" else "pass",
                "at": at,
                "violation": "order" if (cid, version, city, at) in specs[::5] else None,
            }
            for cid, version, city, at in specs
        }
        model = _model(store)
        combos: list[dict[str, str]] = [
            {},
            {"outcome": "fail"},
            {"outcome": "fail,pass"},
            {"outcome": "pass,error,incomplete"},
            {"agent_name": "travel", "agent_version": "1.1"},
            {"agent_version": "1.2", "outcome": "fail,pass"},
            {"violation": "order"},
            {"violation": "order", "outcome": "fail,pass"},
            {"violation": "order", "agent_version": "1.0"},
            {"since": str(T0 + 3), "until": str(T0 + 9), "outcome": "pass,fail"},
        ]
        for params in combos:
            expected = sorted(
                (
                    cid
                    for cid, t in truth.items()
                    if (not params.get("outcome") or t["outcome"] in params["outcome"].split(","))
                    and params.get("agent_version", t["agent_version"]) == t["agent_version"]
                    and params.get("violation", t["violation"]) == t["violation"]
                    and t["at"] >= float(params.get("since", "-inf"))
                    and t["at"] < float(params.get("until", "inf"))
                ),
                key=lambda cid: (truth[cid]["at"], cid),
                reverse=True,
            )
            got: list[str] = []
            cursor = None
            while True:
                page = model.conversations(
                    {**params, "limit": "4", **({"cursor": cursor} if cursor else {})}
                )
                got += [c["conversation_id"] for c in page["conversations"]]
                cursor = page["next_cursor"]
                if cursor is None:
                    break
            assert got == expected, params
    finally:
        store.close()


def test_api_doc_lists_every_outcome_filter_value() -> None:
    """The `outcome` filter accepts every `Outcome`; docs/api.md names each of them."""
    import re

    from tracepass.evaluator.models import Outcome

    doc = (Path(__file__).resolve().parents[2] / "docs" / "api.md").read_text(encoding="utf-8")
    row = next(line for line in doc.splitlines() if line.startswith("| `outcome` |"))
    assert set(re.findall(r"`([a-z_]+)`", row.split("|")[2])) >= {o.value for o in Outcome}
