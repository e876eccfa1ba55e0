"""The scenario every framework corpus replays, and the writer of its files.

Why one scenario for all frameworks: the corpus test compares what tracepass rebuilds
from each framework's spans with the same truth, so a framework that reads differently
shows up as a difference in one place, not as a different scenario.

This module runs inside each framework's own virtual environment (the frameworks pin
conflicting OpenTelemetry versions), so it imports only the OpenTelemetry SDK and the
OTLP exporter's encoders, which every one of those environments has.

The scenario: one conversation (session id `CONVERSATION_ID`) of two turns with the
travel agent below.

* Turn 1 — parallel calls: the model requests `get_weather(city="Paris")` and
  `get_weather(city="Rome")` in ONE step (single-argument tool, on purpose: some
  instrumentations record a single argument as a bare string), then answers.
* Turn 2 — nested arguments and a failing, recovered tool: `search_flights` with a nested
  `filters` object, then `book_flight("FL-404")` which raises, then
  `book_flight("FL-123")` which succeeds, then the answer.

A framework generator builds an agent with the three tools (wrapping the plain functions
below), a fake model that replays `model_steps()` in order (only the LLM is fake), runs
`TURNS` with the framework's real instrumentation installed on `Capture`'s providers, and
calls `Capture.write(...)`.

Files written (`tests/frameworks/corpus/`, or `$TRACEPASS_CORPUS_DIR` when set):

* `<scenario>.otlp.jsonl` — one OTLP/JSON export request per line
  (`{"resourceSpans": ...}` or `{"resourceLogs": ...}`), trace and span ids in hex as the
  OTLP/JSON specification requires: the shape the OpenTelemetry Collector file exporter
  writes.
* `<scenario>.expected.json` — the truth (see `expected_document`): per conversation its
  turns, each with query, answer and tool calls (name, arguments, plain result, error
  substring), plus the framework, instrumentation, versions and settings used.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CORPUS_DIR = Path(__file__).resolve().parent / "corpus"
#: Where `Capture.write` writes instead of `CORPUS_DIR` when set: a check regenerates into
#: a scratch directory and compares, leaving the committed files alone.
CORPUS_DIR_ENV = "TRACEPASS_CORPUS_DIR"

CONVERSATION_ID = "conv-travel-1"
AGENT_NAME = "travel-agent"
SERVICE_NAME = "travel-agent-service"
SYSTEM_PROMPT = "You are a travel assistant. Use the tools."


class ToolFailure(RuntimeError):
    """Raised by `book_flight` for a sold-out flight: the scenario's failing tool."""


def get_weather(city: str) -> str:
    """Current weather for a city."""
    return {"Paris": "Sunny in Paris, 21 C", "Rome": "Rainy in Rome, 15 C"}.get(
        city, f"Unknown weather in {city}"
    )


def search_flights(origin: str, destination: str, filters: dict[str, Any]) -> list[dict[str, Any]]:
    """Search flights between two cities; `filters` has `max_price` (EUR) and `cabin`."""
    flights = [
        {"flight_id": "FL-404", "price": 120, "cabin": "economy"},
        {"flight_id": "FL-123", "price": 180, "cabin": "economy"},
        {"flight_id": "FL-999", "price": 650, "cabin": "business"},
    ]
    return [
        f
        for f in flights
        if f["price"] <= filters.get("max_price", 10**9)
        and f["cabin"] == filters.get("cabin", f["cabin"])
    ]


def book_flight(flight_id: str) -> dict[str, Any]:
    """Book a flight by id."""
    if flight_id == "FL-404":
        raise ToolFailure("flight FL-404 is sold out")
    return {"confirmation": f"CONF-{flight_id[3:]}", "flight_id": flight_id}


TOOLS = {"get_weather": get_weather, "search_flights": search_flights, "book_flight": book_flight}


@dataclass(frozen=True)
class ToolCall:
    """One tool call the scripted model requests."""

    id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Step:
    """One model response: tool calls (possibly several, in parallel) or the final text."""

    tool_calls: tuple[ToolCall, ...] = ()
    text: str | None = None


@dataclass(frozen=True)
class Turn:
    query: str
    steps: tuple[Step, ...]

    @property
    def answer(self) -> str:
        final = self.steps[-1].text
        assert final is not None
        return final


TURNS: tuple[Turn, ...] = (
    Turn(
        query="What's the weather in Paris and in Rome?",
        steps=(
            Step(
                tool_calls=(
                    ToolCall("call_w1", "get_weather", {"city": "Paris"}),
                    ToolCall("call_w2", "get_weather", {"city": "Rome"}),
                )
            ),
            Step(text="Paris is sunny (21 C) and Rome is rainy (15 C)."),
        ),
    ),
    Turn(
        query="Find me an economy flight from Paris to Rome under 200 EUR and book it.",
        steps=(
            Step(
                tool_calls=(
                    ToolCall(
                        "call_s1",
                        "search_flights",
                        {
                            "origin": "Paris",
                            "destination": "Rome",
                            "filters": {"max_price": 200, "cabin": "economy"},
                        },
                    ),
                )
            ),
            Step(tool_calls=(ToolCall("call_b1", "book_flight", {"flight_id": "FL-404"}),)),
            Step(tool_calls=(ToolCall("call_b2", "book_flight", {"flight_id": "FL-123"}),)),
            Step(text="Booked FL-123 (180 EUR), confirmation CONF-123. FL-404 was sold out."),
        ),
    ),
)


def model_steps() -> Iterator[Step]:
    """Every model response of the scenario, in order: what a fake model replays."""
    for turn in TURNS:
        yield from turn.steps


def run_tool(call: ToolCall) -> tuple[Any, str | None]:
    """The plain result of a call, or (None, error message) when the tool raises."""
    try:
        return TOOLS[call.name](**call.arguments), None
    except ToolFailure as exc:
        return None, str(exc)


def expected_turn(turn: Turn) -> dict[str, Any]:
    calls = []
    for step in turn.steps:
        for call in step.tool_calls:
            result, error = run_tool(call)
            calls.append(
                {"name": call.name, "arguments": call.arguments, "result": result, "error": error}
            )
    return {"query": turn.query, "answer": turn.answer, "tool_calls": calls}


@dataclass
class Meta:
    """What produced a corpus file; `settings` are the switches (env vars, options) used.

    `conversations` says how the turns should group: `[[0, 1]]` (the default) when the
    framework's spans carry a session id, `[[0], [1]]` when they carry none and each turn
    is its own (trace-only) conversation. `conversation_id` is the id tracepass should
    report for the grouped conversation (None where it is derived from a trace id).
    `notes` say anything a reader of the support matrix must know.
    """

    framework: str
    framework_version: str
    instrumentation: str
    instrumentation_version: str
    settings: dict[str, str] = field(default_factory=dict)
    conversations: list[list[int]] = field(default_factory=lambda: [[0, 1]])
    conversation_id: str | None = CONVERSATION_ID
    agent_name: str | None = AGENT_NAME
    notes: list[str] = field(default_factory=list)


def expected_document(meta: Meta, turns: Sequence[Turn] = TURNS) -> dict[str, Any]:
    conversations = [
        {
            "conversation_id": meta.conversation_id if len(group) == len(turns) else None,
            "agent_name": meta.agent_name,
            "turns": [expected_turn(turns[i]) for i in group],
        }
        for group in meta.conversations
    ]
    return {
        "framework": meta.framework,
        "framework_version": meta.framework_version,
        "instrumentation": meta.instrumentation,
        "instrumentation_version": meta.instrumentation_version,
        "settings": meta.settings,
        "notes": meta.notes,
        "conversations": conversations,
    }


_ID_FIELDS = ("traceId", "spanId", "parentSpanId")


def _hex_ids(node: Any) -> Any:
    """MessageToDict writes bytes as base64; OTLP/JSON wants trace/span ids in hex."""
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key in _ID_FIELDS and isinstance(value, str):
                out[key] = base64.b64decode(value).hex()
            else:
                out[key] = _hex_ids(value)
        return out
    if isinstance(node, list):
        return [_hex_ids(v) for v in node]
    return node


class Capture:
    """In-memory OpenTelemetry providers for traces and logs, installed globally.

    Instrumentations pick up the global providers (or take `tracer_provider` /
    `logger_provider` explicitly); `write` encodes what was captured with the OTLP
    exporter's own encoders.
    """

    def __init__(self, service_name: str = SERVICE_NAME, *, install: bool = True) -> None:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        self.resource = Resource.create({"service.name": service_name})
        self.span_exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider(resource=self.resource)
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.span_exporter))
        self.log_exporter: Any = None
        self.logger_provider: Any = None
        try:
            from opentelemetry.sdk._logs import LoggerProvider
            from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor

            try:
                from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter as _Mem
            except ImportError:  # older SDKs
                from opentelemetry.sdk._logs.export import (  # type: ignore[attr-defined,no-redef]
                    InMemoryLogExporter as _Mem,
                )
            self.log_exporter = _Mem()
            self.logger_provider = LoggerProvider(resource=self.resource)
            self.logger_provider.add_log_record_processor(
                SimpleLogRecordProcessor(self.log_exporter)
            )
        except ImportError:
            pass
        if install:
            self.install()

    def install(self) -> None:
        from opentelemetry import trace

        trace.set_tracer_provider(self.tracer_provider)
        if self.logger_provider is not None:
            from opentelemetry import _logs

            _logs.set_logger_provider(self.logger_provider)

    def requests(self) -> list[dict[str, Any]]:
        from google.protobuf.json_format import MessageToDict
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

        self.tracer_provider.force_flush()
        out: list[dict[str, Any]] = []
        spans = self.span_exporter.get_finished_spans()
        if spans:
            out.append(_hex_ids(MessageToDict(encode_spans(spans))))
        if self.log_exporter is not None:
            self.logger_provider.force_flush()
            logs = self.log_exporter.get_finished_logs()
            if logs:
                from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs

                out.append(_hex_ids(MessageToDict(encode_logs(logs))))
        return out

    def write(self, scenario: str, meta: Meta, turns: Sequence[Turn] = TURNS) -> Path:
        """Write `<scenario>.otlp.jsonl` and `<scenario>.expected.json`; returns the first."""
        directory = corpus_dir()
        directory.mkdir(parents=True, exist_ok=True)
        requests = self.requests()
        if not requests:
            raise SystemExit(f"{scenario}: the instrumentation produced no spans")
        otlp = directory / f"{scenario}.otlp.jsonl"
        otlp.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in requests))
        expected = directory / f"{scenario}.expected.json"
        expected.write_text(json.dumps(expected_document(meta, turns), indent=2) + "\n")
        return otlp


def corpus_dir() -> Path:
    """`$TRACEPASS_CORPUS_DIR` if set, else the committed corpus directory."""
    return Path(os.environ.get(CORPUS_DIR_ENV) or CORPUS_DIR)


def package_version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


def content_capture_env() -> dict[str, str]:
    """Switch on message-content capture for the instrumentations that gate it."""
    settings = {
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true",
        "TRACELOOP_TRACE_CONTENT": "true",
    }
    os.environ.update(settings)
    return settings
