"""Sampling in the live pipeline: drop sampled-out spans on arrival, decide at completion.

The decision itself (`tracepass.evaluator.stats.conversation_sampling`) depends on the conversation id
only. Two places apply it:

* on arrival, a span that carries its conversation id and whose conversation no rule
  could keep (`SamplingPolicy.could_keep`) is dropped before it is buffered or written
  to the state file — the cheap path that most sampled-out traffic takes;
* at completion, when the agent (and an explicit reference) is known, the rule's own rate
  decides; a conversation dropped then is not evaluated, and its buffered spans are
  discarded from the state file.

A span without a conversation id of its own is never dropped on arrival: a later span of
its trace may name the conversation, and hashing the trace id instead could split one
conversation between "kept" and "dropped".
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence

from opentelemetry.metrics import CallbackOptions, Meter, Observation
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracepass.collector.config import SamplingConfig
from tracepass.collector.instruments import CollectorInstruments
from tracepass.collector.records import SpanRecord
from tracepass.evaluator.judge.call_budget import JudgeBudget
from tracepass.evaluator.models import Reference
from tracepass.evaluator.stats.conversation_sampling import SamplingPolicy, SamplingRule
from tracepass.evaluator.vocabulary import DEFAULT_GRADER, JUDGE_GRADERS

__all__ = ["ConversationSampler", "needs_judge"]

log = logging.getLogger(__name__)

_JUDGE_GRADERS = JUDGE_GRADERS

# (agent_name, agent_version, reference_set) → the exported common labels, bounded; the
# export layer supplies it (the pipeline does not import export).
CommonLabels = Callable[[str | None, str | None, str | None], Mapping[str, str]]


def needs_judge(reference: Reference | None, default_grader: str) -> bool:
    """Whether scoring against `reference` may call the LLM judge."""
    if reference is None:
        return False
    for turn in reference.turns:
        if turn.graders:
            if any(g.type in _JUDGE_GRADERS for g in turn.graders):
                return True
        elif turn.expected_answer is not None and default_grader in _JUDGE_GRADERS:
            return True
    return False


def policy_from_config(config: SamplingConfig) -> SamplingPolicy:
    return SamplingPolicy(
        rate=config.rate,
        seed=config.seed,
        rules=tuple(
            SamplingRule(
                rate=r.rate,
                agent_name=r.agent_name,
                agent_version=r.agent_version,
                reference_set=r.reference_set,
            )
            for r in config.rules
        ),
    )


class ConversationSampler:
    """The pipeline's side of sampling: counting, early drops, final decisions."""

    def __init__(
        self,
        config: SamplingConfig,
        instruments: CollectorInstruments,
        meter: Meter,
        *,
        budget: JudgeBudget | None = None,
        default_grader: str = DEFAULT_GRADER,
        common_labels: CommonLabels | None = None,
        judges_every_conversation: bool = False,
    ) -> None:
        """`judges_every_conversation`: conversation judges are configured, so every
        conversation may call the judge (adaptive sampling counts them all)."""
        self.judges_every_conversation = judges_every_conversation
        self.policy = policy_from_config(config)
        self.adaptive = config.adaptive and budget is not None
        self.budget = budget
        self.default_grader = default_grader
        self._config = config
        self._instruments = instruments
        self._common_labels = common_labels
        self._decisions = meter.create_counter(
            "tracepass_sampling_decisions",
            description="Conversations kept for evaluation or dropped by sampling",
        )
        self._effective_share = 1.0
        meter.create_observable_gauge(
            "tracepass_sampling_rate",
            callbacks=[self._observe_rates],
            description="Configured sampling rate per rule, and the effective judged share",
        )
        self._seen_dropped: set[str] = set()

    @property
    def active(self) -> bool:
        """False when every conversation is kept: the pipeline skips sampling entirely."""
        return not self.policy.keeps_everything or self.adaptive

    def _observe_rates(self, options: CallbackOptions) -> Iterable[Observation]:
        yield Observation(self._config.rate, {"rule": "default", "kind": "configured"})
        for i, rule in enumerate(self._config.rules):
            yield Observation(rule.rate, {"rule": str(i), "kind": "configured"})
        if self.adaptive:
            yield Observation(self._effective_share, {"rule": "adaptive", "kind": "effective"})

    def filter_arrivals(self, records: list[SpanRecord]) -> list[SpanRecord]:
        """The records to keep; the others are counted as dropped spans (and their
        conversation as one dropped decision, the first time it is seen)."""
        if self.policy.keeps_everything:
            return records
        could_keep = self.policy.could_keep
        kept: list[SpanRecord] = []
        dropped = 0
        for record in records:
            cid = record.conversation_id
            if cid is None or could_keep(cid):
                kept.append(record)
                continue
            dropped += 1
            if cid not in self._seen_dropped:
                self._note_dropped(cid)
        if dropped:
            self._instruments.spans_dropped.add(dropped, {"reason": "sampled_out"})
        return kept

    def prefilter_request(self, request: ExportTraceServiceRequest, id_keys: Sequence[str]) -> int:
        """Remove, before normalization, the spans whose own attributes name a
        conversation no rule could keep; returns how many were removed.

        Why: normalization is most of a span's ingest cost, and a sampled-out span needs
        none of it. Only a string value of one of `id_keys` (the normalizer's resolution
        order) counts, exactly as the normalizer would read it; a span whose id is
        anything else is left for the normalizer and `filter_arrivals`.
        """
        if self.policy.keeps_everything:
            return 0
        wanted = frozenset(id_keys)
        could_keep = self.policy.could_keep
        removed = 0
        for resource_spans in request.resource_spans:
            for scope_spans in resource_spans.scope_spans:
                spans = scope_spans.spans
                kept = []
                dropped_here = 0
                for span in spans:
                    found: dict[str, str] = {}
                    for kv in span.attributes:
                        if kv.key in wanted and kv.value.WhichOneof("value") == "string_value":
                            found.setdefault(kv.key, kv.value.string_value)
                    cid = next((found[k] for k in id_keys if found.get(k)), None)
                    if cid is not None and not could_keep(cid):
                        dropped_here += 1
                        if cid not in self._seen_dropped:
                            self._note_dropped(cid)
                    else:
                        kept.append(span)
                if dropped_here:
                    del spans[:]
                    spans.extend(kept)
                    removed += dropped_here
        if removed:
            self._instruments.spans_dropped.add(removed, {"reason": "sampled_out"})
        return removed

    def _note_dropped(self, conversation_id: str) -> None:
        seen = self._seen_dropped
        if len(seen) >= 65_536:  # bounded memory; a re-count after this is harmless
            seen.clear()
        seen.add(conversation_id)
        self._decisions.add(1, {"decision": "dropped"})

    def keep_completed(
        self,
        key: str,
        agent_name: str | None,
        agent_version: str | None,
        reference_set: str | None,
        reference: Reference | None,
    ) -> bool:
        """The final decision for a completed conversation; counts it either way.
        `reference_set` must be given only when the spans named the reference."""
        scale = 1.0
        if (
            self.adaptive
            and self.budget is not None
            and (self.judges_every_conversation or needs_judge(reference, self.default_grader))
        ):
            self.budget.observe_demand()
            scale = self._effective_share = self.budget.adaptive_share()
        keep = self.policy.keep(key, agent_name, agent_version, reference_set, scale=scale)
        labels = {"decision": "kept" if keep else "dropped"}
        if self._common_labels is not None:
            labels.update(self._common_labels(agent_name, agent_version, reference_set))
        self._decisions.add(1, labels)
        return keep
