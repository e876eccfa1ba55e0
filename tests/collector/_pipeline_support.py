"""Helpers for the assembly / state / matching / pipeline tests: record factories, a
manual clock, a metric reader over a real SDK MeterProvider, and a stub evaluator (the
real scorer is tested by the evaluator's own suite; here only the plumbing matters)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from tracepass.collector.config import AssemblyConfig, StateConfig
from tracepass.collector.instruments import CollectorInstruments
from tracepass.collector.matching import ReferenceSource
from tracepass.collector.pipeline import Pipeline, ResultInfo
from tracepass.collector.records import RecordKind, SpanRecord
from tracepass.evaluator.models import (
    Conversation,
    ConversationResult,
    ExpectedTool,
    MatchSpec,
    Outcome,
    Reference,
    ReferenceSet,
    ReferenceTurn,
    TrajectoryScores,
    TurnResult,
)

TURN, TOOL, MODEL, OTHER, END = (
    RecordKind.TURN,
    RecordKind.TOOL,
    RecordKind.MODEL,
    RecordKind.OTHER,
    RecordKind.END,
)


def tid(n: int) -> str:
    return f"{n:032x}"


def sid(n: int) -> str:
    return f"{n:016x}"


def rec(
    trace: int,
    span: int,
    parent: int | None = None,
    kind: RecordKind = OTHER,
    *,
    start: int = 0,
    end: int | None = None,
    conv: str | None = None,
    **kw: Any,
) -> SpanRecord:
    return SpanRecord(
        trace_id=tid(trace),
        span_id=sid(span),
        parent_span_id=sid(parent) if parent is not None else None,
        kind=kind,
        name=kw.pop("name", kind.value),
        start_ns=start,
        end_ns=end if end is not None else start + 10,
        conversation_id=conv,
        **kw,
    )


def turn_records(
    trace: int, base: int, conv: str | None, query: str, answer: str, tools: list[str], t0: int
) -> list[SpanRecord]:
    """A trace root TURN (span `base`) with one TOOL child per name."""
    out = [
        rec(
            trace,
            base,
            None,
            TURN,
            start=t0,
            end=t0 + 1000,
            conv=conv,
            input_text=query,
            output_text=answer,
            agent_name="agent",
            agent_version="1.0",
        )
    ]
    for i, name in enumerate(tools):
        out.append(
            rec(
                trace,
                base + 1 + i,
                base,
                TOOL,
                start=t0 + 10 * (i + 1),
                conv=conv,
                tool_name=name,
                tool_arguments={"i": i},
                tool_result=f"r{i}",
                tool_call_id=f"call-{base}-{i}",
            )
        )
    return out


def end_marker(trace: int, span: int, conv: str, turns: int | None, t: int = 10**6) -> SpanRecord:
    attrs = {} if turns is None else {"tracepass.conversation.turns": turns}
    return rec(trace, span, None, END, start=t, end=t, conv=conv, attributes=attrs)


class Clock:
    def __init__(self, t: float = 1_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, dt: float) -> float:
        self.t += dt
        return self.t


class Metrics:
    """Real SDK MeterProvider + InMemoryMetricReader; `value()` sums a counter's points."""

    def __init__(self) -> None:
        self.reader = InMemoryMetricReader()
        self.provider = MeterProvider(metric_readers=[self.reader])
        self.meter = self.provider.get_meter("test")
        self.instruments = CollectorInstruments.create(self.meter)
        self._last: dict[str, list[tuple[dict[str, Any], float]]] = {}

    def collect(self) -> None:
        data = self.reader.get_metrics_data()
        self._last = {}
        if data is None:
            return
        for rm in data.resource_metrics:
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    pts = self._last.setdefault(metric.name, [])
                    for p in metric.data.data_points:
                        pts.append((dict(p.attributes or {}), getattr(p, "value", 0)))

    def value(self, name: str, **attrs: Any) -> float:
        self.collect()
        return sum(
            v
            for a, v in self._last.get(name, [])
            if all(a.get(k) == want for k, want in attrs.items())
        )


def reference(
    rid: str, queries: list[str], aliases: tuple[str, ...] = (), match_query: str | None = None
) -> Reference:
    return Reference(
        id=rid,
        turns=tuple(
            ReferenceTurn(query=q, expected_tools=(ExpectedTool(name="t"),)) for q in queries
        ),
        match=MatchSpec(query=match_query, aliases=aliases),
    )


def reference_set(name: str, *refs: Reference) -> ReferenceSet:
    return ReferenceSet(name=name, references=refs)


class StubEvaluator:
    """Satisfies the pipeline's `ConversationEvaluator` protocol; records its calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[Conversation, Reference | None, str | None]] = []

    async def aevaluate(
        self,
        conversation: Conversation,
        reference: Reference | None,
        *,
        reference_set: str | None = None,
    ) -> ConversationResult:
        self.calls.append((conversation, reference, reference_set))
        traj = TrajectoryScores(
            exact=True, in_order=True, any_order=True, precision=1.0, recall=1.0, f1=1.0
        )
        turns = tuple(
            TurnResult(
                index=i,
                query=t.query,
                answer=t.answer,
                answer_score=None,
                answer_correct=None,
                tool_correctness=None,
                trajectory=traj,
                tool_calls=t.tool_calls,
                correct=True,
            )
            for i, t in enumerate(conversation.turns)
        )
        ok = conversation.complete
        return ConversationResult(
            conversation_id=conversation.id,
            reference_id=reference.id if reference else None,
            reference_set=reference_set,
            agent_name=conversation.agent_name,
            agent_version=conversation.agent_version,
            correct=ok,
            outcome=Outcome.PASS if ok else Outcome.INCOMPLETE,
            turns=turns,
        )


def genai_request(
    trace: int, base: int, conv: str | None, tools: list[str], t0: int, *, root: bool = True
) -> Any:
    """An OTLP request in GenAI semconv: an `invoke_agent` span `base` (omitted with
    `root=False`) with one `execute_tool` child per name; `conv=None` leaves the
    conversation id out (trace-only spans)."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    req = ExportTraceServiceRequest()
    rs = req.resource_spans.add()
    rs.resource.attributes.add(key="service.name").value.string_value = "svc"
    spans = rs.scope_spans.add().spans

    def span(span_id: int, parent: int | None, name: str, attrs: dict[str, str]) -> None:
        s = spans.add()
        s.trace_id = trace.to_bytes(16, "big")
        s.span_id = span_id.to_bytes(8, "big")
        if parent is not None:
            s.parent_span_id = parent.to_bytes(8, "big")
        s.name = name
        s.start_time_unix_nano = t0 + span_id
        s.end_time_unix_nano = t0 + span_id + 10
        if conv is not None:
            attrs = {"gen_ai.conversation.id": conv, **attrs}
        for k, v in attrs.items():
            s.attributes.add(key=k).value.string_value = v

    if root:
        span(
            base,
            None,
            "invoke_agent bot",
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.input.messages": '[{"role":"user","content":"q"}]',
                "gen_ai.output.messages": '[{"role":"assistant","content":"a"}]',
            },
        )
    for i, name in enumerate(tools, 1):
        span(
            base + i,
            base,
            f"execute_tool {name}",
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": name,
                "gen_ai.tool.call.arguments": '{"x": 1}',
            },
        )
    return req


def refs_source(m: Metrics, sets: list[ReferenceSet] | None = None) -> ReferenceSource:
    if sets is None:
        sets = [reference_set("demo", reference("weather", ["weather in Paris?", "and tomorrow?"]))]

    def loader(paths: object) -> list[ReferenceSet]:
        return sets

    return ReferenceSource([], loader=loader, meter=m.meter)


class Harness:
    """A real Pipeline (SQLite state when `tmp_path` is given) on a manual clock, with
    the stub evaluator and every result the listener saw."""

    def __init__(
        self,
        tmp_path: Path | None,
        durability: str = "batch",
        references: list[ReferenceSet] | None = None,
        **asm: Any,
    ) -> None:
        self.clock = Clock()
        self.metrics = Metrics()
        self.evaluator = StubEvaluator()
        self.results: list[tuple[ConversationResult, ResultInfo]] = []
        state = (
            StateConfig(path=tmp_path / "state.sqlite", durability=durability)  # type: ignore[arg-type]
            if tmp_path is not None
            else None
        )
        self.pipeline = Pipeline(
            self.evaluator,
            assembly=AssemblyConfig(**asm),
            state=state,
            reference_source=refs_source(self.metrics, references),
            instruments=self.metrics.instruments,
            meter=self.metrics.meter,
            listener=lambda r, i: self.results.append((r, i)),
            clock=self.clock,
        )

    async def start(self) -> Pipeline:
        await self.pipeline.start(background=False)
        return self.pipeline


# The conversation API's `turns` for the two-turn conversation the pipeline tests build
# (turn_records(1, 100, …, "weather in Paris?", "Sunny", ["geo", "weather"]) then
# turn_records(2, 200, …, "and tomorrow?", "Rain", ["forecast"])).
TWO_TURN_VIEWS: list[dict[str, Any]] = [
    {
        "query": "weather in Paris?",
        "answer": "Sunny",
        "tool_calls": [
            {
                "name": "geo",
                "arguments": {"i": 0},
                "result": "r0",
                "error": None,
                "call_id": "call-100-0",
            },
            {
                "name": "weather",
                "arguments": {"i": 1},
                "result": "r1",
                "error": None,
                "call_id": "call-100-1",
            },
        ],
    },
    {
        "query": "and tomorrow?",
        "answer": "Rain",
        "tool_calls": [
            {
                "name": "forecast",
                "arguments": {"i": 0},
                "result": "r0",
                "error": None,
                "call_id": "call-200-0",
            },
        ],
    },
]
