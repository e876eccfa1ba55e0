"""Conversation judges' verdicts in the collector: trials of `judge:<name>` series in the
counters and rolling windows (revisions replace them; no verdict is no evidence), in the
window journal (a restart rebuilds them), in the conversation JSON, and refused
configurations (a rubric over its token budget, judges without a model)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from tracepass.collector.api.views import conversation_view_json
from tracepass.collector.config import (
    CollectorConfig,
    ConfigError,
    EvaluationSettings,
    MetricsConfig,
    ReceiverConfig,
    load_config,
)
from tracepass.collector.export.metrics import EvaluationMetrics
from tracepass.collector.export.windows import replay_entry
from tracepass.collector.export.windows.judge_series import journal_entries, journal_entry, trial_id
from tracepass.collector.export.windows.window_entry import decode_entries, window_entry
from tracepass.collector.service import CollectorService
from tracepass.evaluator.models import (
    Conversation,
    ConversationResult,
    Judgement,
    Outcome,
)
from tracepass.evaluator.references import ReferenceLoadError, load_reference_sets

T0 = 1_700_000_000.0


def _judged(cid: str, *outcomes: Outcome, reference: str | None = None) -> ConversationResult:
    judgements = tuple(
        Judgement(
            name=f"j{i}",
            outcome=o,
            score=None
            if o in (Outcome.ERROR, Outcome.SKIPPED_BUDGET)
            else (0.9 if o is Outcome.PASS else 0.1),
            passed=None if o in (Outcome.ERROR, Outcome.SKIPPED_BUDGET) else o is Outcome.PASS,
            error="judge failed after 4 attempt(s): malformed" if o is Outcome.ERROR else None,
            rubric_version="tracepass-goal_completion-v1",
            model="scripted",
        )
        for i, o in enumerate(outcomes)
    )
    return ConversationResult(
        conversation_id=cid,
        reference_id=reference,
        agent_name="bot",
        agent_version="1.0",
        correct=False,
        outcome=Outcome.UNSCORED,
        judgements=judgements,
    )


def _metrics() -> tuple[EvaluationMetrics, InMemoryMetricReader]:
    reader = InMemoryMetricReader()
    meter = MeterProvider(metric_readers=[reader]).get_meter("t")
    config = MetricsConfig(prometheus_host="127.0.0.1", prometheus_port=0, min_conversations=1)
    return EvaluationMetrics(meter, config, preaggregate=False, clock=lambda: T0 + 10), reader


def _counts(reader: InMemoryMetricReader, name: str) -> dict[tuple[str, str], float]:
    out: dict[tuple[str, str], float] = {}
    data = reader.get_metrics_data()
    assert data is not None
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                if metric.name == name:
                    for p in metric.data.data_points:  # type: ignore[union-attr]
                        a = p.attributes or {}
                        out[(str(a["reference_set"]), str(a["outcome"]))] = float(p.value)  # type: ignore[union-attr]
    return out


def test_judgements_are_trials_of_their_own_series() -> None:
    metrics, reader = _metrics()
    metrics.record(_judged("c1", Outcome.PASS, Outcome.ERROR), now=T0)
    metrics.record(_judged("c2", Outcome.FAIL, Outcome.SKIPPED_BUDGET), now=T0 + 1)
    counts = _counts(reader, "tracepass_conversations")
    assert counts[("judge:j0", "pass")] == 1
    assert counts[("judge:j0", "fail")] == 1
    assert counts[("judge:j1", "error")] == 1
    assert counts[("judge:j1", "skipped_budget")] == 1
    assert counts[("unknown", "unscored")] == 2
    windows = {ks.key[2]: ks.windows[0] for ks in metrics.snapshot(refresh=True)}
    assert (windows["judge:j0"].n, windows["judge:j0"].c) == (2, 1)
    assert windows["judge:j1"].n == 0  # no verdict: no evidence either way
    assert windows["unknown"].n == 0


def test_a_revision_replaces_its_judgement() -> None:
    metrics, reader = _metrics()
    metrics.record(_judged("c1", Outcome.FAIL), now=T0)
    metrics.record(_judged("c1", Outcome.PASS), revision=1, now=T0 + 1)
    windows = {ks.key[2]: ks.windows[0] for ks in metrics.snapshot(refresh=True)}
    assert (windows["judge:j0"].n, windows["judge:j0"].c) == (1, 1)
    superseded = _counts(reader, "tracepass_conversations_superseded")
    assert superseded[("judge:j0", "fail")] == 1


def test_journal_holds_the_judge_entries_and_replays_them() -> None:
    cases = [
        (_judged("c1", Outcome.PASS, Outcome.FAIL, reference="r1"), 0),
        (_judged("c2"), 0),
        (_judged("c1", Outcome.FAIL, Outcome.FAIL, reference="r1"), 1),
    ]
    live, _ = _metrics()
    replayed, _ = _metrics()
    for i, (result, revision) in enumerate(cases):
        live.record(result, revision=revision, now=T0 + i)
        entries = decode_entries(journal_entry(result))
        assert entries == journal_entries(result)
        for entry in entries:
            replay_entry(replayed, entry, revision=revision, now=T0 + i)
    assert replayed.aggregator.to_state() == live.aggregator.to_state()
    first = journal_entries(cases[0][0])
    assert first[0] == window_entry(cases[0][0])
    assert first[1].conversation_id == trial_id("c1", "judge:j0") == "c1|judge:j0"
    assert first[1].task == "r1"
    assert journal_entries(cases[1][0]) == [window_entry(cases[1][0])]
    assert decode_entries(journal_entry(cases[1][0])) == [window_entry(cases[1][0])]
    with pytest.raises(ValueError, match="window entry"):
        decode_entries('[["c"]]')


def test_the_conversation_json_lists_the_judgements() -> None:
    result = _judged("c1", Outcome.PASS, Outcome.ERROR)
    view = conversation_view_json(Conversation(id="c1"), result, revision=0)
    ok, missing = view["judgements"]
    assert ok == {
        "name": "j0",
        "passed": True,
        "score": 0.9,
        "reasoning": None,
        "rubric_version": "tracepass-goal_completion-v1",
        "model": "scripted",
        "outcome": "pass",
        "error": None,
        "truncated": False,
    }
    assert (missing["passed"], missing["score"], missing["outcome"]) == (None, None, "error")
    assert "malformed" in missing["error"]
    assert conversation_view_json(Conversation(id="c"), None, revision=0)["judgements"] == []


def test_a_rubric_over_its_token_budget_is_refused_at_load(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "evaluation:\n"
        "  judge: x:y\n"
        "  conversation_judges:\n"
        "    - name: goal\n"
        "      rubric: goal_completion\n"
        "      max_prompt_tokens: 400\n"
    )
    with pytest.raises(
        ConfigError, match=r"c\.yaml:\d+:\d+: evaluation\.conversation_judges.*does not fit"
    ):
        load_config(path)
    path.write_text(
        "evaluation:\n  conversation_judges:\n    - {name: a, rubric: tool_use, colour: red}\n"
    )
    with pytest.raises(ConfigError, match="colour"):
        load_config(path)


def test_judges_without_a_model_do_not_start(tmp_path: Path) -> None:
    config = CollectorConfig(
        receiver=ReceiverConfig(host="127.0.0.1", grpc_port=0, http_port=0),
        metrics=MetricsConfig(prometheus_host="127.0.0.1", prometheus_port=0),
        state={"path": tmp_path / "s.sqlite"},  # type: ignore[arg-type]
        evaluation=EvaluationSettings.model_validate(
            {"conversation_judges": [{"name": "goal", "rubric": "goal_completion"}]}
        ),
    )
    service = CollectorService(config)
    with pytest.raises(ConfigError, match=r"needs evaluation\.judge"):
        asyncio.run(service.start())


def test_policy_judges_parse_and_bad_ones_are_located(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(
        "policies:\n"
        "  - id: shop\n"
        "    agent: shop-*\n"
        "    conversation_judges:\n"
        "      - name: frustration\n"
        "        rubric: user_frustration\n"
        "        applies_to: {agent_version: '2.*'}\n"
        "        pass_threshold: 0.8\n"
    )
    (rs,) = load_reference_sets([good])
    (judge,) = rs.policies[0].conversation_judges
    assert (judge.name, judge.rubric, judge.pass_threshold) == (
        "frustration",
        "user_frustration",
        0.8,
    )
    assert judge.applies_to.agent_version == "2.*"
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "policies:\n"
        "  - id: shop\n"
        "    agent: shop\n"
        "    conversation_judges:\n"
        "      - name: tiny\n"
        "        rubric: handoff\n"
        "        max_prompt_tokens: 300\n"
    )
    with pytest.raises(ReferenceLoadError, match=r"bad\.yaml:\d+.*does not fit"):
        load_reference_sets([bad])
