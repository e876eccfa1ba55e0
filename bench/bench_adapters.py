"""What framework adapters cost: spans/s through `normalize_request` with every adapter
versus with the named ones left out, on the committed real-framework corpus files whose
scopes those adapters claim, in the same run.

Why: an adapter runs on every span of the scopes it names (once the scope is looked up,
which is cached), and some claim scopes other stacks share (`camel` claims the OpenAI
client instrumentations'); `bench_normalize.py`'s payload holds none of those scopes, so
it cannot show their cost. Both sides decode the same protobuf payloads inside the timed
loop; the sides alternate and the median of each (spans per CPU second) is reported with
the ratio (1.00 = free; issue 25 allows 10 %).

    .venv/bin/python bench/bench_adapters.py [--adapter NAME ...] [--repeats R]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracepass.collector.app.cli.sources import requests_from_otlp
from tracepass.collector.normalize import normalize_request
from tracepass.collector.normalize import table as dispatch
from tracepass.collector.normalize.registry import Adapter

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "frameworks" / "corpus"
DEFAULT_ADAPTERS = ("camel", "mastra")
PASSES = 20  # payload passes per timed run


def _scopes(request: ExportTraceServiceRequest) -> set[str]:
    return {s.scope.name for rs in request.resource_spans for s in rs.scope_spans}


def corpus_payloads(adapters: tuple[Adapter, ...]) -> tuple[list[bytes], int]:
    """Every corpus trace request with a scope one of `adapters` claims, and its spans."""
    requests = [
        r
        for r in requests_from_otlp(sorted(CORPUS.glob("*.otlp.jsonl")))
        if isinstance(r, ExportTraceServiceRequest)
        and any(a.matches_scope(scope) for a in adapters for scope in _scopes(r))
    ]
    spans = sum(len(s.spans) for r in requests for rs in r.resource_spans for s in rs.scope_spans)
    return [r.SerializeToString() for r in requests], spans


def rate(payloads: list[bytes], spans: int, adapters: tuple[Adapter, ...]) -> float:
    """Spans per CPU second with `adapters` in the dispatch table."""
    dispatch.ADAPTERS = adapters
    dispatch._SCOPE_CACHE.clear()
    started = time.process_time()
    for _ in range(PASSES):
        for payload in payloads:
            request = ExportTraceServiceRequest()
            request.ParseFromString(payload)
            normalize_request(request)
    return spans * PASSES / (time.process_time() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--adapter", action="append", dest="adapters", metavar="NAME")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    names = tuple(args.adapters or DEFAULT_ADAPTERS)
    everything = dispatch.ADAPTERS
    measured = tuple(a for a in everything if a.name in names)
    unknown = set(names) - {a.name for a in measured}
    if unknown:
        parser.error(f"unknown adapter(s): {', '.join(sorted(unknown))}")
    without = tuple(a for a in everything if a.name not in names)
    payloads, spans = corpus_payloads(measured)
    with_all: list[float] = []
    left_out: list[float] = []
    try:
        for _ in range(args.repeats):
            left_out.append(rate(payloads, spans, without))
            with_all.append(rate(payloads, spans, everything))
    finally:
        dispatch.ADAPTERS = everything
        dispatch._SCOPE_CACHE.clear()
    on, off = statistics.median(with_all), statistics.median(left_out)
    print(f"adapters measured      : {', '.join(names)}")
    print(f"corpus requests, spans : {len(payloads)}, {spans} (x{PASSES} per run)")
    print(f"without them           : {off:,.0f} spans/s")
    print(f"with every adapter     : {on:,.0f} spans/s")
    print(f"ratio with/without     : {on / off:.3f}")


if __name__ == "__main__":
    main()
