"""The window journal holds the rolling windows' entry of each result (schema version 5),
not a second copy of the result: replaying it after a crash must rebuild exactly the
windows the live `record` built, and journals of older state files (whole results)
must still replay."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tracepass.collector.config import CollectorConfig, MetricsConfig, ReceiverConfig
from tracepass.collector.export.metrics import EvaluationMetrics
from tracepass.collector.export.windows import replay_entry, replay_result
from tracepass.collector.export.windows.judge_series import journal_entry
from tracepass.collector.export.windows.window_entry import (
    WindowEntry,
    decode_entry,
    encode_entry,
    window_entry,
)
from tracepass.collector.service import CollectorService
from tracepass.collector.state import JOURNAL_RESULT, JOURNAL_WINDOW, StateStore, StoredResult
from tracepass.collector.state.store import SCHEMA_VERSION
from tracepass.evaluator.models import (
    Conversation,
    ConversationResult,
    GraderResult,
    Outcome,
    TurnResult,
    Violation,
)
from tracepass.evaluator.stats.rolling import RollingAggregator

T0 = 1_700_000_000.0


def _turn(i: int, correct: bool | None, *, grader_error: str | None = None) -> TurnResult:
    return TurnResult(
        index=i,
        query=f"q{i}",
        answer="a",
        answer_score=None if correct is None else float(correct),
        answer_correct=correct,
        graders=(GraderResult(grader="judge", score=0.0, passed=False, error=grader_error),)
        if grader_error
        else (),
        tool_correctness=None,
        correct=correct,
    )


def _result(
    cid: str,
    outcome: Outcome,
    *,
    reference: str | None = "r1",
    policy: str | None = None,
    violations: tuple[str, ...] = (),
    agent: str | None = "bot",
    turns: tuple[TurnResult, ...] = (),
) -> ConversationResult:
    return ConversationResult(
        conversation_id=cid,
        reference_id=reference,
        reference_set="refs" if reference or policy else None,
        agent_name=agent,
        agent_version="1.0",
        correct=outcome is Outcome.PASS,
        outcome=outcome,
        turns=turns or (_turn(0, outcome is Outcome.PASS),),
        policy_id=policy,
        violations=tuple(
            Violation(rule=r, turn=0, tool_call=None, message="m") for r in violations
        ),
    )


# (result, revision): both outcomes, a superseding revision, violations (a known rule and
# one mapped to "other"), an agent-policy result, a reference-free one, an erroring
# turn, a missing agent name, and non-ASCII ids.
CASES: list[tuple[ConversationResult, int]] = [
    (_result("c1", Outcome.PASS), 0),
    (_result("c2", Outcome.FAIL, violations=("forbidden_tool", "made_up")), 0),
    (_result("c1", Outcome.FAIL, turns=(_turn(0, True), _turn(1, False))), 1),
    (_result("c3", Outcome.PASS, reference=None, policy="travel"), 0),
    (_result("c4", Outcome.UNSCORED, reference=None, turns=(_turn(0, None),)), 0),
    (_result("c5", Outcome.ERROR, turns=(_turn(0, None, grader_error="down"),)), 0),
    (_result("c6", Outcome.INCOMPLETE, agent=None), 0),
    (_result("ç-7 \u2603", Outcome.PASS, violations=("forbidden_tool",)), 0),
    (_result("c2", Outcome.PASS), 0),  # a stale revision: ignored both times
]


def _metrics(aggregator: RollingAggregator | None = None) -> EvaluationMetrics:
    from opentelemetry.sdk.metrics import MeterProvider

    config = MetricsConfig(prometheus_host="127.0.0.1", prometheus_port=0)
    return EvaluationMetrics(MeterProvider().get_meter("t"), config, aggregator)


def test_entry_round_trips_and_rejects_what_it_did_not_write() -> None:
    for result, _ in CASES:
        entry = window_entry(result)
        assert decode_entry(encode_entry(entry)) == entry
        assert decode_entry(journal_entry(result)) == entry
        assert len(journal_entry(result)) < len(result.model_dump_json()) / 2
    for bad in ("{}", "[1,2]", '["c",null,null,null,"t","yes","[]"]', "[1,2,3,4,5,6,7]", "x"):
        with pytest.raises(ValueError, match=r"^window entry: "):
            decode_entry(bad)
    assert isinstance(decode_entry('["c",null,null,null,"t",null,"[]"]'), WindowEntry)


def test_replayed_entries_and_replayed_results_rebuild_the_recorded_windows() -> None:
    live, from_entries, from_results = _metrics(), _metrics(), _metrics()
    for i, (result, revision) in enumerate(CASES):
        now = T0 + i
        live.record(result, revision=revision, now=now)
        text = journal_entry(result)  # what put_result journals
        replay_entry(from_entries, decode_entry(text), revision=revision, now=now)
        replay_result(from_results, result, revision=revision, now=now)  # a pre-5 journal
    assert from_entries.aggregator.to_state() == live.aggregator.to_state()
    assert from_results.aggregator.to_state() == live.aggregator.to_state()
    # Replaying onto a snapshot that already holds the entries changes nothing.
    again = _metrics(RollingAggregator.from_state(live.aggregator.to_state()))
    for i, (result, revision) in enumerate(CASES):
        assert not replay_entry(again, window_entry(result), revision=revision, now=T0 + i)
    assert again.aggregator.to_state() == live.aggregator.to_state()


def _config(tmp_path: Path) -> CollectorConfig:
    return CollectorConfig(
        receiver=ReceiverConfig(host="127.0.0.1", grpc_port=0, http_port=0),
        metrics=MetricsConfig(prometheus_host="127.0.0.1", prometheus_port=0),
        state={"path": tmp_path / "s.sqlite", "durability": "batch"},  # type: ignore[arg-type]
    )


async def _journal(path: Path, cases: list[tuple[ConversationResult, int]], *, old: bool) -> None:
    """Store `cases` as the pipeline does, with no snapshot of the windows taken (as if
    the process died before its next persist); `old`: whole results, as before 5."""
    store = StateStore(path)
    store.open()
    try:
        for i, (result, revision) in enumerate(cases):
            seq = await store.results.put_result(
                f"{result.conversation_id}",
                revision=revision,
                closed_at=T0 + i,
                n_spans=1,
                stored=StoredResult(Conversation(id=result.conversation_id), result, revision),
                evaluated_at=T0 + i,
                journal=journal_entry(result),
            )
            assert seq > 0
    finally:
        store.close()
    if old:
        with sqlite3.connect(path) as conn:
            rows = conn.execute("SELECT seq, conv_key FROM window_log ORDER BY seq").fetchall()
            for (seq, _), (result, _) in zip(rows, cases, strict=True):
                conn.execute(
                    "UPDATE window_log SET result=? WHERE seq=?", (result.model_dump_json(), seq)
                )
            # A version 4 file: no `format` column (SQLite >= 3.35 drops columns).
            conn.execute("ALTER TABLE window_log DROP COLUMN format")
            conn.execute("UPDATE meta SET value='4' WHERE key='schema_version'")


@pytest.mark.parametrize("old", [False, True], ids=["entries", "version-4-results"])
async def test_a_restart_replays_the_journal_into_the_windows(tmp_path: Path, old: bool) -> None:
    await _journal(tmp_path / "s.sqlite", CASES, old=old)
    live = _metrics()
    for i, (result, revision) in enumerate(CASES):
        live.record(result, revision=revision, now=T0 + i)
    service = CollectorService(_config(tmp_path))
    await service.start()
    try:
        assert service.metrics.aggregator.to_state() == live.aggregator.to_state()
    finally:
        await service.stop()
    with sqlite3.connect(tmp_path / "s.sqlite") as conn:
        (version,) = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        formats = {f for (f,) in conn.execute("SELECT format FROM window_log")}
    assert version == str(SCHEMA_VERSION)
    assert formats <= {JOURNAL_RESULT if old else JOURNAL_WINDOW}


async def test_the_windows_offer_their_journal_encoder_through_the_chain(tmp_path: Path) -> None:
    """The service no longer injects the encoder: the rolling windows' component offers
    it and the results store, earlier in the chain, takes it when the chain starts;
    without a state file nothing is offered (nothing would be replayed)."""
    from tracepass.collector.export import RollingWindows
    from tracepass.collector.pipeline import ResultChain, ResultsWriter

    store = StateStore(tmp_path / "state.sqlite")
    store.open()
    try:
        writer = ResultsWriter(store)
        chain = ResultChain([writer, RollingWindows(store, _metrics(), persist_interval_s=3600)])
        assert writer.journal_entry is None
        await chain.start()
        assert writer.journal_entry is journal_entry
        await chain.shutdown()
        memory_only = ResultsWriter(None)
        await ResultChain([memory_only, RollingWindows(None, _metrics())]).start()
        assert memory_only.journal_entry is None
    finally:
        store.close()
