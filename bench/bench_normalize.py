"""Spans/s through `normalize_request` versus a baseline that only decodes the same
OTLP payloads and reads each span's attributes (the least any consumer must do).

Payloads are 512-span requests mixing the committed real third-party fixtures
(OpenInference and OpenLLMetry LangGraph runs, big JSON chain state) with
tracepass-style GenAI spans. Both sides decode the protobuf bytes inside the timed
loop; repetitions alternate and the median of each (spans per CPU second) is
reported with the ratio.

    .venv/bin/python bench/bench_normalize.py [--requests N] [--repeats R]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans

from _baseline import decode_and_read_attributes
from tracepass.collector.normalize import normalize_request

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "otlp" / "thirdparty"
SPANS_PER_REQUEST = 512


def _genai_resource_spans(n: int) -> ResourceSpans:
    rs = ResourceSpans()
    rs.resource.attributes.add(key="service.name").value.string_value = "bench"
    spans = rs.scope_spans.add().spans
    for i in range(n):
        span = spans.add()
        span.trace_id = (i // 4 + 1).to_bytes(16, "big")
        span.span_id = (i + 1).to_bytes(8, "big")
        span.start_time_unix_nano = i
        span.end_time_unix_nano = i + 10
        attrs = span.attributes
        attrs.add(key="gen_ai.conversation.id").value.string_value = f"conv-{i // 8}"
        if i % 4 == 0:
            span.name = "invoke_agent bot"
            attrs.add(key="gen_ai.operation.name").value.string_value = "invoke_agent"
            attrs.add(key="gen_ai.agent.name").value.string_value = "bot"
            attrs.add(
                key="gen_ai.input.messages"
            ).value.string_value = (
                '[{"role":"user","parts":[{"type":"text","content":"What is the weather?"}]}]'
            )
            attrs.add(key="gen_ai.output.messages").value.string_value = (
                '[{"role":"assistant","parts":[{"type":"text","content":"Sunny."}],'
                '"finish_reason":"stop"}]'
            )
        else:
            span.name = "execute_tool get_weather"
            span.parent_span_id = (i - i % 4 + 1).to_bytes(8, "big")
            attrs.add(key="gen_ai.operation.name").value.string_value = "execute_tool"
            attrs.add(key="gen_ai.tool.name").value.string_value = "get_weather"
            attrs.add(key="gen_ai.tool.call.id").value.string_value = f"call-{i}"
            attrs.add(key="gen_ai.tool.call.arguments").value.string_value = '{"city": "Paris"}'
            attrs.add(key="gen_ai.tool.call.result").value.string_value = '{"temp": 21}'
    return rs


def _payloads(count: int) -> list[bytes]:
    """Requests of exactly 512 spans: half third-party fixture spans, half GenAI spans."""
    fixture_spans: list[tuple[bytes, object]] = []
    for path in sorted(DATA.glob("*.binpb")):
        req = ExportTraceServiceRequest.FromString(path.read_bytes())
        for rs in req.resource_spans:
            for ss in rs.scope_spans:
                for sp in ss.spans:
                    fixture_spans.append((rs.resource.SerializeToString(), sp))
    out: list[bytes] = []
    for k in range(count):
        req = ExportTraceServiceRequest()
        third = req.resource_spans.add()
        third.resource.ParseFromString(fixture_spans[0][0])
        target = third.scope_spans.add().spans
        for j in range(SPANS_PER_REQUEST // 2):
            target.add().CopyFrom(fixture_spans[(k * 7 + j) % len(fixture_spans)][1])
        req.resource_spans.append(_genai_resource_spans(SPANS_PER_REQUEST // 2))
        out.append(req.SerializeToString())
    return out


def baseline(payloads: list[bytes]) -> int:
    return decode_and_read_attributes(payloads)


def normalized(payloads: list[bytes]) -> int:
    n = 0
    for data in payloads:
        records, rejections = normalize_request(ExportTraceServiceRequest.FromString(data))
        n += len(records) + len(rejections)
    return n


def _time(fn: Callable[[list[bytes]], int], payloads: list[bytes]) -> tuple[float, int]:
    # CPU time of this process: single-threaded work, so it is the one-core rate, and
    # unlike wall time it does not depend on what else the machine runs.
    t0 = time.process_time()
    n = fn(payloads)
    return time.process_time() - t0, n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    payloads = _payloads(args.requests)
    base_rates: list[float] = []
    norm_rates: list[float] = []
    for _ in range(args.repeats):
        dt, n = _time(baseline, payloads)
        base_rates.append(n / dt)
        dt, n = _time(normalized, payloads)
        norm_rates.append(n / dt)
    base = statistics.median(base_rates)
    norm = statistics.median(norm_rates)
    print(f"spans per run          : {args.requests * SPANS_PER_REQUEST}")
    print(f"baseline decode+attrs  : {base:,.0f} spans/s")
    print(f"normalize_request      : {norm:,.0f} spans/s")
    print(f"ratio normalize/base   : {norm / base:.2f}")


if __name__ == "__main__":
    main()
