"""Cost of one `@tool` call versus a hand-written `tracer.start_as_current_span` span.

Both run in the same process, against the same SDK TracerProvider (a processor that only
counts ended spans, plus tracepass's conversation processor), with the same attributes:
the baseline builds the arguments/result JSON with `json.dumps` and uses a constant call
id, so it is the strictest fair baseline. Repetitions alternate between the two and the
median per-call time of each is reported; the ratio is what matters (target <= 1.25x).

    .venv/bin/python bench/bench_instrumentation.py [--calls N] [--repeats R]
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
from collections.abc import Callable

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.trace import SpanKind

from tracepass.instrumentation import conversation, install, tool


class CountingProcessor(SpanProcessor):
    """Stands in for an exporter so spans are fully built and ended, never shipped."""

    def __init__(self) -> None:
        self.ended = 0

    def on_end(self, span: ReadableSpan) -> None:
        self.ended += 1


def build() -> tuple[Callable[[int, int], int], Callable[[int, int], int], CountingProcessor]:
    provider = TracerProvider()
    counter = CountingProcessor()
    provider.add_span_processor(counter)
    install(provider)
    trace.set_tracer_provider(provider)
    tracer = provider.get_tracer("bench")

    @tool
    def add(a: int, b: int) -> int:
        return a + b

    def baseline(a: int, b: int) -> int:
        with tracer.start_as_current_span(
            "execute_tool add",
            kind=SpanKind.INTERNAL,
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "add",
                "gen_ai.tool.type": "function",
                "gen_ai.tool.call.id": "call_0123456789abcdef01234567",
                "gen_ai.tool.call.arguments": json.dumps({"a": a, "b": b}),
            },
        ) as span:
            result = a + b
            span.set_attribute("gen_ai.tool.call.result", json.dumps(result))
        return result

    return add, baseline, counter


def per_call_ns(fn: Callable[[int, int], int], calls: int) -> float:
    gc.collect()
    start = time.perf_counter_ns()
    for i in range(calls):
        fn(i, 1)
    return (time.perf_counter_ns() - start) / calls


def measure(
    tool_fn: Callable[[int, int], int],
    baseline: Callable[[int, int], int],
    calls: int,
    repeats: int,
) -> tuple[float, float]:
    per_call_ns(tool_fn, calls // 10)  # warm up both paths
    per_call_ns(baseline, calls // 10)
    tool_runs: list[float] = []
    base_runs: list[float] = []
    for rep in range(repeats):
        order = [(tool_fn, tool_runs), (baseline, base_runs)]
        if rep % 2:
            order.reverse()
        for fn, runs in order:
            runs.append(per_call_ns(fn, calls))
    return statistics.median(tool_runs), statistics.median(base_runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=9)
    ns = parser.parse_args()
    tool_fn, baseline, counter = build()
    rows = []
    t, b = measure(tool_fn, baseline, ns.calls, ns.repeats)
    rows.append(("outside a conversation", t, b))
    with conversation("bench-conversation", reference_id="bench"):
        t, b = measure(tool_fn, baseline, ns.calls, ns.repeats)
    rows.append(("inside a conversation", t, b))
    assert counter.ended > 0
    print(f"@tool vs bare start_as_current_span ({ns.calls} calls x {ns.repeats} repeats, median)")
    for label, t, b in rows:
        print(
            f"  {label:<24} @tool {t / 1000:7.2f} us   bare {b / 1000:7.2f} us   ratio {t / b:.2f}x"
        )
    worst = max(t / b for _, t, b in rows)
    print(f"worst ratio: {worst:.2f}x (target <= 1.25x)")


if __name__ == "__main__":
    main()
