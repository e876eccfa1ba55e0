"""Spans/s through `normalize_request` versus a baseline that only decodes the same
OTLP payloads and reads each span's attributes (the least any consumer must do).

Payloads are 512-span requests mixing the committed real third-party fixtures
(OpenInference and OpenLLMetry LangGraph runs, big JSON chain state) with
tracepass-style GenAI spans. Both sides decode the protobuf bytes inside the timed
loop; repetitions alternate and the median of each (spans per CPU second) is
reported with the ratio.

    .venv/bin/python bench/bench_normalize.py [--requests N] [--repeats R]

`--custom-mapping` adds the cost of a `conventions.custom` mapping that matches no span
(issue 25: at most 2 % per span): `normalize_request` with it versus without it, on the
same payloads in the same run, for a mapping whose scope glob excludes every scope
(decided once per scope) and one with no scope whose span-name glob matches no span
(one cached lookup per span).

    .venv/bin/python bench/bench_normalize.py --custom-mapping
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
from tracepass.collector.config import ConventionsConfig
from tracepass.collector.normalize import CustomConventions, normalize_request

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


def _custom(match: dict[str, object]) -> CustomConventions:
    return CustomConventions(
        ConventionsConfig.model_validate(
            {
                "custom": [
                    {
                        "name": "nothing",
                        "match": match,
                        "kind": "tool",
                        "fields": {"tool_name": "acme.tool", "arguments": "acme.args#/a/b"},
                    }
                ]
            }
        )
    )


def _with_custom(custom: CustomConventions) -> Callable[[list[bytes]], int]:
    def run(payloads: list[bytes]) -> int:
        n = 0
        for data in payloads:
            request = ExportTraceServiceRequest.FromString(data)
            records, rejections = normalize_request(request, custom=custom)
            n += len(records) + len(rejections)
        return n

    return run


def custom_mapping_cost(payloads: list[bytes], repeats: int) -> None:
    """Per-span cost of a mapping that matches nothing (see the module docstring)."""
    variants = {
        "scope excludes all": _with_custom(_custom({"scope": "acme.*"})),
        "span name matches none": _with_custom(_custom({"span_name": "acme.*"})),
    }
    rates: dict[str, list[float]] = {"plain": [], **{k: [] for k in variants}}
    for _ in range(repeats):
        dt, n = _time(normalized, payloads)
        rates["plain"].append(n / dt)
        for name, fn in variants.items():
            dt, n = _time(fn, payloads)
            rates[name].append(n / dt)
    plain = statistics.median(rates["plain"])
    print(f"spans per run          : {len(payloads) * SPANS_PER_REQUEST}")
    print(f"normalize_request      : {plain:,.0f} spans/s (no custom mapping)")
    for name in variants:
        rate = statistics.median(rates[name])
        # Time per span with the mapping over time per span without it, minus one.
        print(f"custom, {name:<22}: {rate:,.0f} spans/s, cost {plain / rate - 1:+.1%} per span")


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
    parser.add_argument(
        "--custom-mapping", action="store_true", help="cost of a mapping that matches nothing"
    )
    args = parser.parse_args()
    payloads = _payloads(args.requests)
    if args.custom_mapping:
        custom_mapping_cost(payloads, args.repeats)
        return
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
