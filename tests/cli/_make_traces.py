"""Run a small instrumented calculator agent and write its spans as an OTLP file
(length-prefixed protobuf, as the OpenTelemetry Collector file exporter writes it).

Run in a subprocess by the tests, so its global tracer provider never meets other tests':
    python _make_traces.py OUT.binpb --version 1.0 --trials 4 --bug-every 0
Real parts only: the tracepass decorators, the OTel SDK, the OTLP protobuf encoder.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tracepass.instrumentation import agent, conversation, install, tool

QUERIES = {"add": "What is 15 + 27?", "mul": "What is 6 times 7?"}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--version", default="1.0")
    parser.add_argument("--trials", type=int, default=4)
    parser.add_argument("--bug-every", type=int, default=0, help="every Nth add trial is wrong")
    parser.add_argument(
        "--tag-answers", action="store_true", help="end each answer with its trial number"
    )
    args = parser.parse_args()

    provider = TracerProvider(resource=Resource.create({"service.name": "calc-agent"}))
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    install(provider)

    @tool
    def add(a: int, b: int) -> int:
        return a + b

    @tool
    def multiply(a: int, b: int) -> int:
        return a * b

    state: dict[str, object] = {"bug": False, "tag": ""}

    @agent(name="calc-agent", version=args.version)
    def answer(query: str) -> str:
        if "times" in query:
            return f"The answer is {multiply(6, 7)}.{state['tag']}"
        if "+" in query:
            return f"The answer is {add(15, 26 if state['bug'] else 27)}.{state['tag']}"
        return "I can only do arithmetic."

    for i in range(args.trials):
        for ref, query in QUERIES.items():
            state["bug"] = ref == "add" and args.bug_every > 0 and i % args.bug_every == 0
            state["tag"] = f" (trial {i})" if args.tag_answers else ""
            # Half the trials name their reference, half are matched by their query.
            with conversation(
                f"{ref}-{args.version}-{i}", reference_id=ref if i % 2 == 0 else None
            ):
                answer(query)
    with conversation(f"weather-{args.version}"):
        answer("What's the weather in Paris?")

    spans = exporter.get_finished_spans()
    half = len(spans) // 2
    frames = b""
    for chunk in (spans[:half], spans[half:]):
        body = encode_spans(chunk).SerializeToString()
        frames += len(body).to_bytes(4, "big") + body
    args.out.write_bytes(frames)
    provider.shutdown()


if __name__ == "__main__":
    main()
