"""Collector ingest throughput, ingest only (bench_e2e.py measures what users run): spans/s
through OTLP/HTTP protobuf (real aiohttp receiver on loopback) into normalization + assembly, with `none` and `batch` durability, next to a
baseline measured in the same run that only decodes the same payloads and reads each
span's attributes (the least any OTLP consumer must do).

The collector side runs on one event loop (plus the SQLite writer thread in `batch`);
the HTTP client runs in a separate process so its cost is not charged to the collector.
Requests carry 512 GenAI-semconv spans each (agent turns with tool calls, 8 spans per
conversation, fresh ids in every request so assembly really buffers them). Nothing
completes during the run (idle timeout is long): this measures ingestion into assembly.

    .venv/bin/python bench/bench_collector.py [--requests N] [--repeats R] [--concurrency C]
    .venv/bin/python bench/bench_collector.py --usage-only   # token usage reading on/off
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from opentelemetry.metrics import Meter, NoOpMeter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from _baseline import decode_and_read_attributes
from tracepass.collector.api import ConversationViews, conversation_routes
from tracepass.collector.app.cli.serve import tune_gc
from tracepass.collector.config import AssemblyConfig, ReceiverConfig, StateConfig
from tracepass.collector.instruments import CollectorInstruments
from tracepass.collector.pipeline import Pipeline
from tracepass.collector.receiver.servers import ReceiverServers
from tracepass.evaluator.models import Conversation, ConversationResult, Outcome, Reference

SPANS_PER_REQUEST = 512
USER = '[{"role":"user","parts":[{"type":"text","content":"What is the weather in Paris?"}]}]'
ASSISTANT = (
    '[{"role":"assistant","parts":[{"type":"text","content":"Sunny, 21 C."}],'
    '"finish_reason":"stop"}]'
)


def payload(k: int, *, model_calls: bool = False) -> bytes:
    req = ExportTraceServiceRequest()
    rs = req.resource_spans.add()
    rs.resource.attributes.add(key="service.name").value.string_value = "bench"
    spans = rs.scope_spans.add().spans
    base = k * SPANS_PER_REQUEST
    for i in range(SPANS_PER_REQUEST):
        g = base + i
        span = spans.add()
        span.trace_id = (g // 4 + 1).to_bytes(16, "big")
        span.span_id = (g + 1).to_bytes(8, "big")
        span.start_time_unix_nano = 1_700_000_000_000_000_000 + g * 1000
        span.end_time_unix_nano = span.start_time_unix_nano + 500
        attrs = span.attributes
        attrs.add(key="gen_ai.conversation.id").value.string_value = f"conv-{g // 8}"
        if i % 4 == 0:
            span.name = "invoke_agent bot"
            attrs.add(key="gen_ai.operation.name").value.string_value = "invoke_agent"
            attrs.add(key="gen_ai.agent.name").value.string_value = "bot"
            attrs.add(key="gen_ai.agent.version").value.string_value = "1.2.0"
            attrs.add(key="gen_ai.input.messages").value.string_value = USER
            attrs.add(key="gen_ai.output.messages").value.string_value = ASSISTANT
        elif model_calls and i % 4 == 1:
            # A model call with token usage (the `--usage` comparison's spans).
            span.name = "chat gpt-4o"
            span.parent_span_id = (g - g % 4 + 1).to_bytes(8, "big")
            attrs.add(key="gen_ai.operation.name").value.string_value = "chat"
            attrs.add(key="gen_ai.provider.name").value.string_value = "openai"
            attrs.add(key="gen_ai.request.model").value.string_value = "gpt-4o"
            attrs.add(key="gen_ai.response.model").value.string_value = "gpt-4o-2024-08-06"
            attrs.add(key="gen_ai.usage.input_tokens").value.int_value = 1200 + i
            attrs.add(key="gen_ai.usage.output_tokens").value.int_value = 80 + i
            attrs.add(key="gen_ai.usage.cache_read.input_tokens").value.int_value = 1024
            attrs.add(key="gen_ai.output.messages").value.string_value = ASSISTANT
        else:
            span.name = "execute_tool get_weather"
            span.parent_span_id = (g - g % 4 + 1).to_bytes(8, "big")
            attrs.add(key="gen_ai.operation.name").value.string_value = "execute_tool"
            attrs.add(key="gen_ai.tool.name").value.string_value = "get_weather"
            attrs.add(key="gen_ai.tool.call.id").value.string_value = f"call-{g}"
            attrs.add(key="gen_ai.tool.call.arguments").value.string_value = '{"city":"Paris"}'
            attrs.add(key="gen_ai.tool.call.result").value.string_value = '{"temp":21}'
    return req.SerializeToString()


# `--metrics sdk` swaps the no-op meter for a real OpenTelemetry SDK meter provider (with
# an in-memory reader, standing in for the Prometheus reader of `tracepass serve`): the
# instrument updates the collector makes then cost what they cost in production.
METRICS = "noop"


def bench_meter() -> Meter:
    if METRICS == "sdk":
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader

        return MeterProvider(metric_readers=[InMemoryMetricReader()]).get_meter("bench")
    return NoOpMeter("bench")


def baseline(payloads: list[bytes]) -> tuple[float, float]:
    """(spans per wall second, spans per CPU second) of decode + read attributes."""
    t0 = time.perf_counter()
    c0 = time.process_time()
    n = decode_and_read_attributes(payloads)
    return n / (time.perf_counter() - t0), n / (time.process_time() - c0)


class NullEvaluator:
    async def aevaluate(
        self,
        conversation: Conversation,
        reference: Reference | None,
        *,
        reference_set: str | None = None,
    ) -> ConversationResult:
        return ConversationResult(
            conversation_id=conversation.id, reference_id=None, correct=True, outcome=Outcome.PASS
        )


def _client(port: int, payloads: list[bytes], concurrency: int, out: mp.Queue) -> None:  # type: ignore[type-arg]
    import aiohttp

    async def run() -> tuple[float, int]:
        url = f"http://127.0.0.1:{port}/v1/traces"
        headers = {"Content-Type": "application/x-protobuf"}
        queue: asyncio.Queue[bytes] = asyncio.Queue()
        for p in payloads:
            queue.put_nowait(p)
        failures = 0
        async with aiohttp.ClientSession() as session:

            async def worker() -> None:
                nonlocal failures
                while not queue.empty():
                    body = queue.get_nowait()
                    async with session.post(url, data=body, headers=headers) as resp:
                        await resp.read()
                        if resp.status != 200:
                            failures += 1

            t0 = time.perf_counter()
            await asyncio.gather(*(worker() for _ in range(concurrency)))
            return time.perf_counter() - t0, failures

    out.put(asyncio.run(run()))


async def serve_and_measure(
    payloads: list[bytes], durability: str, concurrency: int, state_dir: Path
) -> tuple[float, float, int]:
    """(spans per wall second, spans per collector CPU second, failed requests)."""
    meter = bench_meter()
    instruments = CollectorInstruments.create(meter)
    pipeline = Pipeline(
        NullEvaluator(),
        assembly=AssemblyConfig(idle_timeout_s=3600, max_buffered_spans=10_000_000),
        state=StateConfig(path=state_dir / f"{durability}.sqlite", durability=durability),  # type: ignore[arg-type]
        instruments=instruments,
        meter=meter,
    )
    await pipeline.start()
    servers = ReceiverServers(
        pipeline,
        instruments,
        ReceiverConfig(
            host="127.0.0.1", http_port=0, grpc_enabled=False, max_inflight_requests=256
        ),
        extra_routes=conversation_routes(ConversationViews(pipeline)),
    )
    await servers.start()
    ctx = mp.get_context("spawn")
    out: mp.Queue = ctx.Queue()  # type: ignore[type-arg]
    proc = ctx.Process(target=_client, args=(servers.http_port, payloads, concurrency, out))
    proc.start()
    loop = asyncio.get_running_loop()
    # CPU time of this process only (event loop + SQLite writer thread; the client is
    # another process): spans per CPU second is the one-core rate, and unlike wall time
    # it does not depend on what else the machine is running. It includes the client
    # process start-up wait, so it is a slight underestimate of the rate.
    store = pipeline.store
    assert store is not None
    c0 = time.process_time()
    w0 = store.writer_cpu_s
    elapsed, failures = await loop.run_in_executor(None, out.get)
    cpu = time.process_time() - c0
    writer = store.writer_cpu_s - w0
    proc.join()
    held = pipeline.assembler.held_spans
    await servers.stop(1.0)
    await pipeline.stop()
    assert held == len(payloads) * SPANS_PER_REQUEST, held
    n = len(payloads) * SPANS_PER_REQUEST
    WRITER_US.setdefault(durability, []).append(writer / n * 1e6)
    return n / elapsed, n / cpu, failures


# Writer-thread CPU microseconds per span of each HTTP run, by durability mode.
WRITER_US: dict[str, list[float]] = {}


async def direct_ingest(
    payloads: list[bytes], durability: str, state_dir: Path
) -> tuple[float, float]:
    """ingest() without HTTP (decode + normalize + assembly + state), 8 concurrent:
    (spans per wall second, spans per CPU second)."""
    pipeline = Pipeline(
        NullEvaluator(),
        assembly=AssemblyConfig(idle_timeout_s=3600, max_buffered_spans=10_000_000),
        state=StateConfig(path=state_dir / f"direct-{durability}.sqlite", durability=durability),  # type: ignore[arg-type]
        instruments=CollectorInstruments.create(meter := bench_meter()),
        meter=meter,
    )
    await pipeline.start()
    it = iter(payloads)

    async def worker() -> None:
        for data in it:
            await pipeline.ingest(ExportTraceServiceRequest.FromString(data))

    t0 = time.perf_counter()
    c0 = time.process_time()
    await asyncio.gather(*(worker() for _ in range(8)))
    dt = time.perf_counter() - t0
    cpu = time.process_time() - c0
    await pipeline.stop()
    n = len(payloads) * SPANS_PER_REQUEST
    return n / dt, n / cpu


def stages(payloads: list[bytes]) -> dict[str, float]:
    """Spans per CPU second of each ingest stage alone, to show where the time goes."""
    from tracepass.collector.assembly import Assembler
    from tracepass.collector.normalize import normalize_request
    from tracepass.collector.state import encode_request

    n = len(payloads) * SPANS_PER_REQUEST
    out: dict[str, float] = {}
    t0 = time.process_time()
    reqs = [ExportTraceServiceRequest.FromString(p) for p in payloads]
    out["decode"] = n / (time.process_time() - t0)
    t0 = time.process_time()
    recs = [normalize_request(r)[0] for r in reqs]
    out["normalize"] = n / (time.process_time() - t0)
    asm = Assembler(
        AssemblyConfig(idle_timeout_s=3600, max_buffered_spans=10_000_000),
        CollectorInstruments.create(bench_meter()),
    )
    t0 = time.process_time()
    for batch in recs:
        asm.add(batch)
    out["assembly"] = n / (time.process_time() - t0)
    t0 = time.process_time()
    for req in reqs:
        encode_request(req)
    out["encode (batch)"] = n / (time.process_time() - t0)
    return out


def usage_reading(requests: int, repeats: int) -> None:
    """What reading token usage costs at ingest (issue 23: <= 5 %): the same payloads
    (a quarter of the spans are model calls carrying usage, model and provider) through
    normalization and through `ingest()` (decode + normalize + assembly, durability
    none), with the usage reader on, and off (`read_usage` replaced by a function that
    reads nothing: the collector before it existed), alternating in the same run."""
    import tracepass.collector.normalize as normalize_pkg
    from tracepass.collector.normalize import normalize_request

    real = normalize_pkg.read_usage
    payloads = [payload(k, model_calls=True) for k in range(requests)]
    reqs = [ExportTraceServiceRequest.FromString(p) for p in payloads]
    n = len(payloads) * SPANS_PER_REQUEST
    rates: dict[str, list[float]] = {}
    for _ in range(repeats):
        for label, reader in (("off", lambda attrs: None), ("on", real)):
            normalize_pkg.read_usage = reader  # type: ignore[assignment]
            try:
                t0 = time.process_time()
                for r in reqs:
                    normalize_request(r)
                rates.setdefault(f"normalize {label}", []).append(n / (time.process_time() - t0))
                with tempfile.TemporaryDirectory() as tmp:
                    _, c = asyncio.run(direct_ingest(payloads, "none", Path(tmp)))
                rates.setdefault(f"ingest {label}", []).append(c)
            finally:
                normalize_pkg.read_usage = real
    # Building the conversations (evaluation path, not ingest): the figures (timeline
    # spans, usage, latency, prices) on and off.
    import tracepass.collector.assembly.build as build_mod

    real_figures = build_mod.turn_figures
    by_conv: dict[str, list[Any]] = {}
    for r in reqs:
        for rec in normalize_request(r)[0]:
            by_conv.setdefault(rec.conversation_id or "", []).append(rec)
    convs = list(by_conv.items())
    for _ in range(repeats):
        for label, figures in (
            ("off", lambda root, members, book: ((), None, None, None)),
            ("on", real_figures),
        ):
            build_mod.turn_figures = figures  # type: ignore[assignment]
            try:
                t0 = time.process_time()
                for key, recs in convs:
                    build_mod.build_conversation(key, recs)
                rates.setdefault(f"build {label}", []).append(
                    (time.process_time() - t0) / len(convs) * 1e6
                )
            finally:
                build_mod.turn_figures = real_figures
    med = {k: statistics.median(v) for k, v in rates.items()}
    print(f"-- token usage reading (CPU time, median of {repeats}, {n} spans, 1/4 model calls)")
    for stage in ("normalize", "ingest"):
        off, on = med[f"{stage} off"], med[f"{stage} on"]
        print(
            f"  {stage + ' (usage off / on)':<40}: {off:>9,.0f} / {on:>9,.0f} spans/s"
            f"  -> reading usage costs {1 - on / off:+.1%}"
        )
    off, on = med["build off"], med["build on"]
    print(
        f"  {'build a conversation (figures off / on)':<40}: {off:>8.1f} / {on:>8.1f} us"
        f"  -> +{on - off:.1f} us per conversation ({len(convs)} conversations of 8 spans,"
        " 2 model calls priced by the library)"
    )


def _show(label: str, rate: float, base: float, spread: tuple[float, float]) -> str:
    return (
        f"{label:<42}: {rate:>9,.0f} spans/s  ({rate / base:.2f}x)"
        f"  [min {spread[0]:,.0f} .. max {spread[1]:,.0f}]"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument(
        "--metrics",
        choices=("noop", "sdk"),
        default="noop",
        help="collector instruments: no-op meter (default) or a real OTel SDK meter",
    )
    parser.add_argument(
        "--usage-only",
        action="store_true",
        help="only the token-usage reading comparison (reader on vs off, same run)",
    )
    args = parser.parse_args()
    global METRICS
    METRICS = args.metrics
    # The GC setting `Pipeline.start` applies (process-wide), applied first so the
    # baseline and every collector run measure under the same one.
    tune_gc()
    if args.usage_only:
        usage_reading(args.requests, max(args.repeats, 5))
        return
    payloads = [payload(k) for k in range(args.requests)]
    wall: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    for _ in range(args.repeats):
        w, c = baseline(payloads)
        wall.setdefault("baseline", []).append(w)
        cpu.setdefault("baseline", []).append(c)
        for mode in ("none", "batch"):
            with tempfile.TemporaryDirectory() as tmp:
                w, c, failures = asyncio.run(
                    serve_and_measure(payloads, mode, args.concurrency, Path(tmp))
                )
                assert failures == 0, f"{failures} requests failed"
                wall.setdefault(f"http-{mode}", []).append(w)
                cpu.setdefault(f"http-{mode}", []).append(c)
                w, c = asyncio.run(direct_ingest(payloads, mode, Path(tmp)))
                wall.setdefault(f"direct-{mode}", []).append(w)
                cpu.setdefault(f"direct-{mode}", []).append(c)
        for name, rate in stages(payloads).items():
            cpu.setdefault(f"stage {name}", []).append(rate)
    print(
        f"spans per run: {args.requests * SPANS_PER_REQUEST} ({args.requests} requests x 512),"
        f" median of {args.repeats} repetitions [spread], {args.metrics} metrics"
    )
    labels = {
        "baseline": "baseline decode + read attributes",
        "http-none": "OTLP/HTTP -> assembly, durability=none",
        "http-batch": "OTLP/HTTP -> assembly, durability=batch",
        "direct-none": "ingest() direct, durability=none",
        "direct-batch": "ingest() direct, durability=batch",
    }
    for title, table in (("wall clock", wall), ("CPU time of the collector process", cpu)):
        med = {k: statistics.median(v) for k, v in table.items()}
        base = med["baseline"]
        print(f"-- {title} (ratios against the baseline of the same clock)")
        for key, label in labels.items():
            print(_show(label, med[key], base, (min(table[key]), max(table[key]))))
        cost = 1 - med["http-batch"] / med["http-none"]
        print(f"{'cost of batch durability over HTTP':<42}: {cost:.0%} fewer spans/s than none")
        if title.startswith("CPU"):
            per_span = 1e6 / med["http-batch"] - 1e6 / med["http-none"]
            writer = statistics.median(WRITER_US["batch"])
            print(
                f"{'  per span':<42}: {per_span:.1f} us more CPU, of which the SQLite "
                f"writer thread {writer:.1f} us (serialize + insert + commit)"
            )
    print("-- each stage alone (CPU time)")
    for key in sorted(k for k in cpu if k.startswith("stage ")):
        print(f"  {key:<40}: {statistics.median(cpu[key]):>9,.0f} spans/s")
    print("ingest-only targets: >= 20,000 spans/s and >= 0.5x baseline (HTTP, batch)")
    usage_reading(args.requests, args.repeats)


if __name__ == "__main__":
    main()
