"""Issue 21 item 14: `metrics.label_limit` bounds label *combinations*, not only each
label alone. 50 agents × 50 versions (each label under its limit of 50) made 2,500
label sets, 60k series and a 14 MB scrape; now the series per family stay within
the limit, the rest folded into `other` and counted."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from tracepass.collector.config import MetricsConfig
from tracepass.collector.export.metrics import EvaluationMetrics
from tracepass.collector.export.telemetry import build_telemetry
from tracepass.evaluator.models import ConversationResult, Outcome, TurnResult

LIMIT = 50
SIDE = 50  # agents and versions: each label alone fits the limit, their product does not


def _result(i: int, agent: str, version: str) -> ConversationResult:
    turn = TurnResult(
        index=0,
        query="q",
        answer="a",
        answer_score=1.0,
        answer_correct=True,
        tool_correctness=None,
        correct=True,
    )
    return ConversationResult(
        conversation_id=f"c{i}",
        reference_id="r",
        reference_set="refs",
        agent_name=agent,
        agent_version=version,
        correct=True,
        outcome=Outcome.PASS,
        turns=(turn,),
    )


def test_label_sets_bounded_per_family() -> None:
    config = MetricsConfig(
        prometheus_host="127.0.0.1", prometheus_port=0, label_limit=LIMIT, min_conversations=1
    )
    tel = build_telemetry(config)
    try:
        em = EvaluationMetrics(tel.meter(), config, clock=lambda: 1_000_000.0)
        i = 0
        for a in range(SIDE):
            for v in range(SIDE):
                em.record(_result(i, f"agent{a}", f"v{v}"), now=1_000_000.0)
                i += 1
        assert tel.prometheus_url is not None
        with urllib.request.urlopen(tel.prometheus_url, timeout=60) as resp:
            text = resp.read().decode()
        total = 0.0
        label_sets: set[tuple[str, str, str]] = set()
        overflow: dict[str, float] = {}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if s.name == "tracepass_conversations_total":
                    label_sets.add(
                        (
                            s.labels["agent_name"],
                            s.labels["agent_version"],
                            s.labels["reference_set"],
                        )
                    )
                    total += s.value
                if s.name == "tracepass_label_overflow_total":
                    overflow[s.labels["label"]] = s.value
        # At most LIMIT admitted sets plus the folds they overflow into (fewer than 3 per
        # admitted agent: (agent, other, refs) and the all-`other` set).
        assert len(label_sets) <= 2 * LIMIT + 1, len(label_sets)
        assert total == SIDE * SIDE  # nothing lost: folded, not dropped
        assert overflow.get("combination", 0) == SIDE * SIDE - sum(
            1 for key in em.aggregator if "other" not in key
        )
        assert len(em.aggregator.keys()) == len(label_sets)
        assert len(text) < 2_000_000, len(text)
    finally:
        tel.shutdown()
