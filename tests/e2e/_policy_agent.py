"""A scripted travel agent for the policy end-to-end test, instrumented with tracepass's
own decorators and exporting over real OTLP/HTTP.

Each turn makes one model call (a GenAI-semconv `chat` span declaring the offered tools
in `gen_ai.tool.definitions`, as an instrumented LLM client would; the model is scripted)
and then runs the tools the script names through `@tool` functions. Four conversations:

* `unoffered`: search, then `cancel_booking`, a tool the model was never offered;
* `badargs`: search, then `book_flight` with `passengers="two"` (schema says integer);
* `early`: `book_flight` before any `search_flights` (the policy's order rule);
* `clean`: search, then a valid booking.

The same spans are also written to OUT (one OTLP protobuf request) for the offline run.

    python _policy_agent.py HTTP_ENDPOINT OUT
"""

from __future__ import annotations

import json
import sys
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


@agent(name=AGENT, version="1.0")
def travel_agent(query: str, script: list[tuple[str, dict[str, Any]]]) -> str:
    model_call(query)
    for name, args in script:
        TOOLS[name](**args)
    return "Done: your trip is sorted."


def main(endpoint: str, out: str) -> None:
    provider = configure(service_name=AGENT, endpoint=endpoint, protocol="http/protobuf")
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    for cid, script in SCRIPTS.items():
        with conversation(cid):
            travel_agent("Book me a flight to Lisbon", script)
    assert force_flush(), "OTLP export did not flush"
    request = encode_spans(memory.get_finished_spans())
    with open(out, "wb") as f:
        f.write(request.SerializeToString())


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
