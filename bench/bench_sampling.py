"""Cost of a sampled-out span next to a kept one, through the pipeline's real ingest path
(OTLP protobuf decode → normalization → sampling → assembly → SQLite `batch` state).

Both runs ingest the same 512-span requests into a fresh `Pipeline` with `batch`
durability; one samples every conversation in (`rate: 1.0`), the other out
(`rate: 0.0`). CPU seconds of this process are divided by spans; the ratio dropped/kept
is the figure (docs/configuration.md: a dropped span is normalized to learn its
conversation id, then dropped before it is buffered or written). The decode-and-read
baseline of bench_collector is measured in the same run for scale. Nothing completes
(idle timeout is long): this is ingest cost, not evaluation.

    .venv/bin/python bench/bench_sampling.py [--requests N] [--repeats R]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from opentelemetry.metrics import NoOpMeter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from _baseline import decode_and_read_attributes
from bench_collector import SPANS_PER_REQUEST, payload
from tracepass.collector.app.cli.serve import tune_gc
from tracepass.collector.config import AssemblyConfig, SamplingConfig, StateConfig
from tracepass.collector.instruments import CollectorInstruments
from tracepass.collector.pipeline import Pipeline
from tracepass.collector.pipeline.sampling import ConversationSampler


class _NoEvaluator:
    async def aevaluate(self, *args: object, **kwargs: object) -> object:
        raise AssertionError("nothing completes in this benchmark")


async def _run(bodies: list[bytes], rate: float, state_dir: Path) -> float:
    meter = NoOpMeter("bench")
    instruments = CollectorInstruments.create(meter)
    sampler = ConversationSampler(SamplingConfig(rate=rate), instruments, meter)
    pipeline = Pipeline(
        _NoEvaluator(),  # type: ignore[arg-type]
        assembly=AssemblyConfig(
            idle_timeout_s=10**6, max_open_conversations=10**7, max_buffered_spans=10**8
        ),
        state=StateConfig(path=state_dir / f"state-{rate}.sqlite", durability="batch"),
        instruments=instruments,
        meter=meter,
        sampler=sampler,
        max_pending_evaluations=10**9,
    )
    await pipeline.start(background=False)
    start = time.process_time()
    for body in bodies:
        await pipeline.ingest(ExportTraceServiceRequest.FromString(body))
    spent = time.process_time() - start
    await pipeline.stop()
    return spent / (len(bodies) * SPANS_PER_REQUEST)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    tune_gc()
    kept_s, dropped_s, base_s = [], [], []
    for r in range(args.repeats):
        bodies = [payload(k + r * args.requests) for k in range(args.requests)]
        start = time.process_time()
        decode_and_read_attributes(bodies)
        base_s.append((time.process_time() - start) / (len(bodies) * SPANS_PER_REQUEST))
        with tempfile.TemporaryDirectory() as tmp:
            kept_s.append(asyncio.run(_run(bodies, 1.0, Path(tmp))))
            dropped_s.append(asyncio.run(_run(bodies, 0.0, Path(tmp))))
    kept, dropped, base = (statistics.median(x) for x in (kept_s, dropped_s, base_s))
    print(f"spans per run: {args.requests * SPANS_PER_REQUEST}, repeats {args.repeats}")
    print(f"decode+read baseline : {base * 1e6:6.2f} us/span")
    print(f"kept span (batch)    : {kept * 1e6:6.2f} us/span  ({kept / base:.2f}x baseline)")
    print(f"sampled-out span     : {dropped * 1e6:6.2f} us/span  ({dropped / base:.2f}x baseline)")
    print(f"dropped / kept       : {dropped / kept:.2f}x")


if __name__ == "__main__":
    main()
