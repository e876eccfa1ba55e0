"""Decode throughput of the OTLP receiver paths, spans/s, against a baseline measured in
the same run: bare `ExportTraceServiceRequest.FromString` + reading every span's
attributes (the least any consumer must do).

Payloads are 512-span requests of GenAI-style agent spans made by the real OTel SDK and
encoded by the exporters' encoder. Measured (each also reads every attribute):

* receiver protobuf: `CappedDecompressor` (identity) + `decode_protobuf` + span count;
* receiver protobuf+gzip: the same with a gzip body inflated under the cap;
* receiver OTLP/JSON: the hand-written decoder (`decode_json_bytes`), hex ids;
* json_format reference: hex ids rewritten to base64 then `json_format.ParseDict`,
  the obvious alternative the hand-written decoder replaces.

Repetitions alternate between variants; the median of each is reported.

    .venv/bin/python bench/bench_decode.py [--requests N] [--repeats R]
"""

from __future__ import annotations

import argparse
import base64
import gzip
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "collector" / "src"))

from tracepass.collector.receiver.decode import (
    CappedDecompressor,
    count_spans,
    decode_protobuf,
)
from tracepass.collector.receiver.otlp_json import decode_json_bytes

SPANS_PER_REQUEST = 512
CAP = 64 << 20


def _make_request(seed: int) -> ExportTraceServiceRequest:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "bench-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("bench", "1.0")
    for i in range(SPANS_PER_REQUEST // 4):
        with tracer.start_as_current_span(
            "invoke_agent travel",
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": "travel",
                "gen_ai.conversation.id": f"conv-{seed}-{i // 3}",
            },
        ):
            with tracer.start_as_current_span(
                "chat gpt",
                attributes={
                    "gen_ai.operation.name": "chat",
                    "gen_ai.request.model": "gpt-x",
                    "gen_ai.usage.input_tokens": 812,
                    "gen_ai.usage.output_tokens": 64,
                    "gen_ai.input.messages": json.dumps(
                        [{"role": "user", "parts": [{"type": "text", "content": "Book " * 20}]}]
                    ),
                },
            ):
                pass
            for name in ("search_flights", "book_hotel"):
                with tracer.start_as_current_span(
                    f"execute_tool {name}",
                    attributes={
                        "gen_ai.operation.name": "execute_tool",
                        "gen_ai.tool.name": name,
                        "gen_ai.tool.call.id": f"call-{i}",
                        "gen_ai.tool.call.arguments": json.dumps({"city": "Paris", "n": i}),
                        "gen_ai.tool.call.result": json.dumps({"ok": True, "price": 99.5}),
                    },
                ) as span:
                    span.add_event("retry", {"attempt": 1})
    provider.shutdown()
    return encode_spans(exporter.get_finished_spans())


def _otlp_json(request: ExportTraceServiceRequest) -> bytes:
    doc = json_format.MessageToDict(request, use_integers_for_enums=True)
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for sp in ss["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in sp:
                        sp[key] = base64.b64decode(sp[key]).hex()
    return json.dumps(doc, separators=(",", ":")).encode()


def _read_attributes(request: ExportTraceServiceRequest) -> int:
    n = 0
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            for span in ss.spans:
                for kv in span.attributes:
                    value = kv.value
                    which = value.WhichOneof("value")
                    if which is not None:
                        getattr(value, which)
                        n += 1
    return n


def _baseline(payloads: list[bytes]) -> None:
    for p in payloads:
        _read_attributes(ExportTraceServiceRequest.FromString(p))


def _receiver(payloads: list[bytes], encoding: str) -> None:
    for p in payloads:
        d = CappedDecompressor(encoding, CAP)
        for i in range(0, len(p), 65536):
            d.feed(p[i : i + 65536])
        request = decode_protobuf(d.finish())
        count_spans(request)
        _read_attributes(request)


def _receiver_json(payloads: list[bytes]) -> None:
    for p in payloads:
        request = decode_json_bytes(p)
        count_spans(request)
        _read_attributes(request)


def _rewrite_ids(obj: Any) -> Any:
    for rs in obj.get("resourceSpans", ()):
        for ss in rs.get("scopeSpans", ()):
            for sp in ss.get("spans", ()):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if sp.get(key):
                        sp[key] = base64.b64encode(bytes.fromhex(sp[key])).decode()
    return obj


def _json_format(payloads: list[bytes]) -> None:
    for p in payloads:
        request = json_format.ParseDict(
            _rewrite_ids(json.loads(p)), ExportTraceServiceRequest(), ignore_unknown_fields=True
        )
        _read_attributes(request)


def _time(fn: Callable[[], None]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--requests", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    requests = [_make_request(i) for i in range(args.requests)]
    protobuf = [r.SerializeToString() for r in requests]
    gzipped = [gzip.compress(p, 6) for p in protobuf]
    otlp_json = [_otlp_json(r) for r in requests]
    assert all(decode_json_bytes(j) == r for j, r in zip(otlp_json, requests, strict=True))
    spans = sum(count_spans(r) for r in requests)

    variants: dict[str, Callable[[], None]] = {
        "baseline FromString+attrs": lambda: _baseline(protobuf),
        "receiver protobuf": lambda: _receiver(protobuf, "identity"),
        "receiver protobuf+gzip": lambda: _receiver(gzipped, "gzip"),
        "receiver OTLP/JSON": lambda: _receiver_json(otlp_json),
        "json_format.ParseDict": lambda: _json_format(otlp_json[:2]),
    }
    span_counts = {name: spans for name in variants}
    span_counts["json_format.ParseDict"] = sum(count_spans(r) for r in requests[:2])
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(args.repeats):
        for name, fn in variants.items():
            samples[name].append(span_counts[name] / _time(fn))
    rates = {name: statistics.median(v) for name, v in samples.items()}
    base = rates["baseline FromString+attrs"]

    print(f"requests x spans       : {args.requests} x {SPANS_PER_REQUEST}")
    print(
        f"payload bytes/request  : protobuf {len(protobuf[0]):,}  gzip {len(gzipped[0]):,}  "
        f"json {len(otlp_json[0]):,}"
    )
    for name, rate in rates.items():
        print(f"{name:<26}: {rate:>12,.0f} spans/s   ratio to baseline {rate / base:.3f}")
    print(
        f"hand-written JSON vs json_format: "
        f"{rates['receiver OTLP/JSON'] / rates['json_format.ParseDict']:.1f}x"
    )


if __name__ == "__main__":
    main()
