"""A scripted travel agent for the policy end-to-end test, instrumented with tracepass's
own decorators and exporting over real OTLP/HTTP.

Each turn makes one model call (a GenAI-semconv `chat` span declaring the offered tools
in `gen_ai.tool.definitions`, as an instrumented LLM client would; the model is scripted)
and then runs the tools the script names through `@tool` functions. Four conversations:

* `unoffered`: search, then `cancel_booking`, a tool the model was never offered;
* `badargs`: search, then `book_flight` with `passengers="two"` (schema says integer);
* `early`: `book_flight` before any `search_flights` (the policy's order rule);
* `clean`: search, then a valid booking.

The same spans can also be written to a file (one OTLP protobuf request) for the
offline run. Options choose the scripts, how often each runs, the id prefix and the
agent version (the real-Prometheus test sends clean traffic, then regresses it):

    python _policy_agent.py HTTP_ENDPOINT [--out FILE] [--scripts clean,early]
                            [--repeat N] [--prefix P] [--version V]
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tracepass.instrumentation import agent, configure, conversation, force_flush, tool

AGENT = "policy-travel-agent"
OFFERED = [
    {
        "type": "function",
        "name": "search_flights",
        "description": "Find flights.",
        "parameters": {
            "type": "object",
            "properties": {"to": {"type": "string"}},
            "required": ["to"],
        },
    },
    {
        "type": "function",
        "name": "book_flight",
        "description": "Book a flight.",
        "parameters": {
            "type": "object",
            "properties": {"flight_id": {"type": "string"}, "passengers": {"type": "integer"}},
            "required": ["flight_id", "passengers"],
        },
    },
]
SEARCH = ("search_flights", {"to": "LIS"})
BOOK = ("book_flight", {"flight_id": "TP1", "passengers": 2})
SCRIPTS: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "unoffered": [SEARCH, ("cancel_booking", {"booking_id": "B7"})],
    "badargs": [SEARCH, ("book_flight", {"flight_id": "TP1", "passengers": "two"})],
    "early": [BOOK, SEARCH],
    "clean": [SEARCH, BOOK],
}


@tool
def search_flights(to: str) -> list[str]:
    return ["TP1", "TP2"]


@tool
def book_flight(flight_id: str, passengers: int) -> str:
    return f"booked {flight_id} for {passengers}"


@tool
def cancel_booking(booking_id: str) -> str:
    return f"cancelled {booking_id}"


TOOLS = {f.__name__: f for f in (search_flights, book_flight, cancel_booking)}


def model_call(query: str) -> None:
    """The (scripted) LLM call: a GenAI-semconv chat span declaring the offered tools."""
    tracer = trace.get_tracer("fake-llm-client")
    with tracer.start_as_current_span(
        "chat scripted-model",
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "scripted-model",
            "gen_ai.tool.definitions": json.dumps(OFFERED),
            "gen_ai.input.messages": json.dumps(
                [{"role": "user", "parts": [{"type": "text", "content": query}]}]
            ),
        },
    ):
        pass


@agent(name=AGENT)
def travel_agent(query: str, script: list[tuple[str, dict[str, Any]]]) -> str:
    model_call(query)
    for name, args in script:
        TOOLS[name](**args)
    return "Done: your trip is sorted."


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("endpoint")
    parser.add_argument("--out")
    parser.add_argument("--scripts", default=",".join(SCRIPTS))
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--prefix", default="")
    parser.add_argument("--version", default="1.0")
    args = parser.parse_args(argv)
    provider = configure(service_name=AGENT, endpoint=args.endpoint, protocol="http/protobuf")
    memory = InMemorySpanExporter()
    if args.out:
        provider.add_span_processor(SimpleSpanProcessor(memory))
    for i in range(args.repeat):
        for name in args.scripts.split(","):
            suffix = f"-{i}" if args.repeat > 1 else ""
            with conversation(f"{args.prefix}{name}{suffix}", agent_version=args.version):
                travel_agent("Book me a flight to Lisbon", SCRIPTS[name])
    assert force_flush(), "OTLP export did not flush"
    if args.out:
        with open(args.out, "wb") as f:
            f.write(encode_spans(memory.get_finished_spans()).SerializeToString())


if __name__ == "__main__":
    main()
