"""Sampling in the pipeline: the evaluated conversations are exactly those the documented
formula keeps, sampled-out spans never reach the state file, and rules that need the
agent decide at completion (discarding what was buffered)."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

from _pipeline_support import Clock, Metrics, StubEvaluator, end_marker, turn_records

from tracepass.collector.config import AssemblyConfig, SamplingConfig, StateConfig
from tracepass.collector.matching import ReferenceSource
from tracepass.collector.pipeline import Pipeline
from tracepass.collector.pipeline.sampling import ConversationSampler
from tracepass.collector.records import SpanRecord
from tracepass.evaluator.models import ReferenceSet


def _formula(conversation_id: str, rate: float, seed: str) -> bool:
    digest = hashlib.sha256(f"{seed}:{conversation_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") < rate * 2**64


def _no_references(m: Metrics) -> ReferenceSource:
    def loader(paths: object) -> list[ReferenceSet]:
        return []

    return ReferenceSource([], loader=loader, meter=m.meter)


def _pipeline(tmp_path: Path, sampling: SamplingConfig) -> tuple[Pipeline, StubEvaluator, Metrics]:
    metrics = Metrics()
    evaluator = StubEvaluator()
    sampler = ConversationSampler(sampling, metrics.instruments, metrics.meter)
    pipeline = Pipeline(
        evaluator,
        assembly=AssemblyConfig(),
        state=StateConfig(path=tmp_path / "state.sqlite", durability="batch"),
        reference_source=_no_references(metrics),
        instruments=metrics.instruments,
        meter=metrics.meter,
        clock=Clock(),
        sampler=sampler,
    )
    return pipeline, evaluator, metrics


def _conversation(n: int, agent: str = "agent") -> list[SpanRecord]:
    cid = f"conv-{n}"
    records = turn_records(2 * n + 1, 1_000 * n + 10, cid, "q?", "a", ["lookup"], t0=1_000)
    records = [r if r.agent_name is None else _with_agent(r, agent) for r in records]
    return [*records, end_marker(2 * n + 2, 1_000 * n + 1, cid, 1, t=5_000)]


def _with_agent(record: SpanRecord, agent: str) -> SpanRecord:
    from dataclasses import replace

    return replace(record, agent_name=agent)


def _stored_conversation_keys(path: Path) -> set[str]:
    with sqlite3.connect(path) as conn:
        spans = {k for (k,) in conn.execute("SELECT DISTINCT conv_key FROM spans")}
        linked = {k for (k,) in conn.execute("SELECT DISTINCT conv_key FROM request_keys")}
    return spans | linked


async def test_rate_0_3_evaluates_exactly_the_formula_on_10000_conversations(
    tmp_path: Path,
) -> None:
    pipeline, evaluator, metrics = _pipeline(tmp_path, SamplingConfig(rate=0.3, seed="prod"))
    await pipeline.start(background=False)
    ids = [f"conv-{n}" for n in range(10_000)]
    for start in range(0, 10_000, 500):
        batch = [r for n in range(start, start + 500) for r in _conversation(n)]
        await pipeline.ingest_records(batch)
        await pipeline.process_due()  # as the background loop would: keep the backlog low
    evaluated = sorted(c.id for c, _, _ in evaluator.calls)
    expected = sorted(i for i in ids if _formula(i, 0.3, "prod"))
    assert evaluated == expected
    # Sampled-out spans were never written: the state file knows only kept conversations.
    assert _stored_conversation_keys(tmp_path / "state.sqlite") <= set(expected)
    dropped = len(ids) - len(expected)
    assert metrics.value("tracepass_spans_dropped", reason="sampled_out") == dropped * 3
    assert metrics.value("tracepass_sampling_decisions", decision="dropped") == dropped
    assert metrics.value("tracepass_sampling_decisions", decision="kept") == len(expected)
    await pipeline.stop()


async def test_agent_rule_decides_at_completion_and_discards_buffered_spans(
    tmp_path: Path,
) -> None:
    config = SamplingConfig(rate=1.0, rules=[{"agent_name": "travel-*", "rate": 0.25}])  # type: ignore[list-item]
    pipeline, evaluator, _ = _pipeline(tmp_path, config)
    await pipeline.start(background=False)
    batch = [r for n in range(400) for r in _conversation(n, agent="travel-bot")]
    batch += [r for n in range(400, 500) for r in _conversation(n, agent="support")]
    await pipeline.ingest_records(batch)
    await pipeline.process_due()
    evaluated = {c.id for c, _, _ in evaluator.calls}
    travel = {f"conv-{n}" for n in range(400) if _formula(f"conv-{n}", 0.25, "")}
    assert evaluated == travel | {f"conv-{n}" for n in range(400, 500)}
    # Dropped-at-completion conversations are discarded from the state file.
    stored = _stored_conversation_keys(tmp_path / "state.sqlite")
    assert not (stored & ({f"conv-{n}" for n in range(400)} - travel))
    await pipeline.stop()


async def test_spans_without_their_own_conversation_id_are_not_dropped_on_arrival(
    tmp_path: Path,
) -> None:
    pipeline, evaluator, metrics = _pipeline(tmp_path, SamplingConfig(rate=0.0))
    await pipeline.start(background=False)
    # A trace-only conversation: its final decision is taken on its key at completion.
    records = turn_records(7, 70, None, "q?", "a", ["lookup"], t0=1_000)
    await pipeline.ingest_records(records)
    assert metrics.value("tracepass_spans_dropped", reason="sampled_out") == 0
    await pipeline.process_due(now=10**9)
    assert evaluator.calls == []
    assert metrics.value("tracepass_sampling_decisions", decision="dropped") == 1
    await pipeline.stop()


def _request(conversations: range) -> bytes:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    req = ExportTraceServiceRequest()
    spans = req.resource_spans.add().scope_spans.add().spans
    for n in conversations:
        for i in range(2):
            span = spans.add()
            span.trace_id = (n + 1).to_bytes(16, "big")
            span.span_id = (2 * n + i + 1).to_bytes(8, "big")
            span.name = "execute_tool lookup" if i else "invoke_agent bot"
            span.start_time_unix_nano = 1_000 + i
            span.end_time_unix_nano = 2_000
            attrs = span.attributes
            attrs.add(key="gen_ai.conversation.id").value.string_value = f"conv-{n}"
            attrs.add(key="gen_ai.operation.name").value.string_value = (
                "execute_tool" if i else "invoke_agent"
            )
            if i:
                span.parent_span_id = (2 * n + 1).to_bytes(8, "big")
                attrs.add(key="gen_ai.tool.name").value.string_value = "lookup"
    return req.SerializeToString()


async def test_protobuf_requests_are_prefiltered_before_normalization_and_state(
    tmp_path: Path,
) -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    pipeline, _, metrics = _pipeline(tmp_path, SamplingConfig(rate=0.3, seed="pb"))
    await pipeline.start(background=False)
    result = await pipeline.ingest(ExportTraceServiceRequest.FromString(_request(range(500))))
    assert result.accepted == 1_000  # sampled-out spans are acknowledged, not refused
    kept = {f"conv-{n}" for n in range(500) if _formula(f"conv-{n}", 0.3, "pb")}
    assert metrics.value("tracepass_spans_dropped", reason="sampled_out") == 2 * (500 - len(kept))
    with sqlite3.connect(tmp_path / "state.sqlite") as conn:
        blobs = [row[0] for row in conn.execute("SELECT data FROM requests")]
    stored = set()
    for blob in blobs:
        for rs in ExportTraceServiceRequest.FromString(blob).resource_spans:
            for ss in rs.scope_spans:
                for span in ss.spans:
                    stored.update(
                        a.value.string_value
                        for a in span.attributes
                        if a.key == "gen_ai.conversation.id"
                    )
    assert stored == kept
    await pipeline.stop()


def test_adaptive_share_scales_the_threshold_for_judge_needing_conversations() -> None:
    from tracepass.evaluator.judge.call_budget import JudgeBudget
    from tracepass.evaluator.models import GraderSpec, Reference, ReferenceTurn

    now = [86_400.0 * 10]
    budget = JudgeBudget(calls_per_day=8_640, clock=lambda: now[0])  # 0.1 call/s
    metrics = Metrics()
    sampler = ConversationSampler(
        SamplingConfig(rate=1.0, adaptive=True), metrics.instruments, metrics.meter, budget=budget
    )
    assert sampler.active
    judged = Reference(
        id="r",
        turns=(ReferenceTurn(query="q", expected_answer="a", graders=(GraderSpec(type="llm"),)),),
    )
    plain = Reference(id="p", turns=(ReferenceTurn(query="q", expected_answer="a"),))
    kept_judged = kept_plain = 0
    for n in range(2_000):
        now[0] += 1.0  # one judge-needing conversation per second: 10x the allowance
        kept_judged += sampler.keep_completed(f"j{n}", "a", "1", None, judged)
        kept_plain += sampler.keep_completed(f"p{n}", "a", "1", None, plain)
    assert kept_plain == 2_000  # conversations that need no judge are never thinned
    assert 100 < kept_judged < 400  # ≈ 10 % once the demand estimate settles
    metrics.collect()
    effective = [
        v for a, v in metrics._last["tracepass_sampling_rate"] if a.get("kind") == "effective"
    ]
    assert effective
    assert 0.05 < effective[0] < 0.2


def test_conversation_judges_make_every_conversation_judge_needing() -> None:
    from tracepass.evaluator.judge.call_budget import JudgeBudget

    now = [86_400.0 * 10]
    budget = JudgeBudget(calls_per_day=8_640, clock=lambda: now[0])  # 0.1 call/s
    metrics = Metrics()
    sampler = ConversationSampler(
        SamplingConfig(rate=1.0, adaptive=True),
        metrics.instruments,
        metrics.meter,
        budget=budget,
        judges_every_conversation=True,  # evaluation.conversation_judges configured
    )
    kept = 0
    for n in range(2_000):
        now[0] += 1.0
        kept += sampler.keep_completed(f"c{n}", "a", "1", None, None)  # no reference
    assert 100 < kept < 400  # thinned like judge-needing conversations: ≈ 10 %
