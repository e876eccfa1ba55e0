"""Issue 13: a seeded fuzz of the live OTLP/HTTP and OTLP/gRPC receivers in front of
the real pipeline. Whatever arrives, the answer is never a 5xx other than a retryable
503 (gRPC: never UNKNOWN or INTERNAL), and `tracepass_export_requests_total` counts
every request under the outcome the client saw."""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from pathlib import Path

import aiohttp
import grpc
import pytest
from _fuzz import FuzzInput, inputs
from _receiver_support import Metrics

from tracepass.collector.config import CollectorConfig
from tracepass.collector.pipeline import Pipeline
from tracepass.collector.receiver import ReceiverServers
from tracepass.collector.receiver.signals import SIGNALS
from tracepass.evaluator.scoring.evaluator import EvaluationConfig, Evaluator

COUNT = int(os.environ.get("TRACEPASS_FUZZ_INPUTS", "20000"))  # `make reliability`: 10**6
SEED = int(os.environ.get("TRACEPASS_FUZZ_SEED", "13"))
BATCH = 48
METHODS = {signal.name: f"/{signal.grpc_service}/Export" for signal in SIGNALS}
PATHS = {signal.name: signal.http_path for signal in SIGNALS}

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240 + COUNT // 100)]

HTTP_OUTCOME = {200: "ok", 400: "invalid", 413: "too_large", 415: "unsupported", 503: "unavailable"}
GRPC_OUTCOME = {
    grpc.StatusCode.OK: "ok",
    grpc.StatusCode.INVALID_ARGUMENT: "invalid",
    grpc.StatusCode.RESOURCE_EXHAUSTED: "too_large",
    grpc.StatusCode.UNAVAILABLE: "unavailable",
}


async def _http(session: aiohttp.ClientSession, base: str, item: FuzzInput) -> int:
    headers = {"Content-Type": item.content_type}
    if item.encoding:
        headers["Content-Encoding"] = item.encoding
    try:
        async with session.post(base + PATHS[item.signal], data=item.body, headers=headers) as resp:
            await resp.read()
            return resp.status
    except aiohttp.ClientError:
        return -1  # reported with the input


async def _grpc(channel: grpc.aio.Channel, item: FuzzInput) -> grpc.StatusCode:
    try:
        await channel.unary_unary(METHODS[item.signal])(item.body, timeout=30)
    except grpc.aio.AioRpcError as exc:
        return exc.code()
    return grpc.StatusCode.OK


async def test_fuzzed_inputs_never_crash_and_are_all_counted(tmp_path: Path) -> None:
    config = CollectorConfig.model_validate(
        {
            "receiver": {"host": "127.0.0.1", "grpc_port": 0, "http_port": 0},
            "state": {"path": str(tmp_path / "state.sqlite"), "durability": "none"},
        }
    )
    metrics = Metrics()
    pipeline = Pipeline.from_config(
        config, Evaluator(EvaluationConfig()), instruments=metrics.instruments
    )
    await pipeline.start()
    servers = ReceiverServers(pipeline, metrics.instruments, config.receiver)
    await servers.start()
    seen_http: Counter[str] = Counter()
    seen_grpc: Counter[str] = Counter()
    unexpected: list[str] = []
    try:
        url = f"http://127.0.0.1:{servers.http_port}"
        connector = aiohttp.TCPConnector(limit=BATCH)
        async with (
            aiohttp.ClientSession(connector=connector, auto_decompress=False) as session,
            grpc.aio.insecure_channel(f"127.0.0.1:{servers.grpc_port}") as channel,
        ):
            batch: list[FuzzInput] = []
            for item in inputs(SEED, COUNT):
                batch.append(item)
                if len(batch) < BATCH:
                    continue
                await _send(session, url, channel, batch, seen_http, seen_grpc, unexpected)
                batch = []
            if batch:
                await _send(session, url, channel, batch, seen_http, seen_grpc, unexpected)
    finally:
        await servers.stop(1.0)
        await pipeline.stop()
    assert not unexpected, unexpected[:20]
    assert sum(seen_http.values()) + sum(seen_grpc.values()) == COUNT
    for protocol, seen in (("http", seen_http), ("grpc", seen_grpc)):
        counted = {
            outcome: metrics.value("tracepass_export_requests", protocol=protocol, outcome=outcome)
            for outcome in seen
        }
        counted["ok"] = counted.get("ok", 0) + metrics.value(
            "tracepass_export_requests", protocol=protocol, outcome="partial"
        )
        assert counted == dict(seen), protocol
        assert metrics.value("tracepass_export_requests", protocol=protocol) == sum(seen.values())
    print(f"fuzz seed {SEED}: {COUNT} inputs; http {dict(seen_http)}; grpc {dict(seen_grpc)}")


async def _send(
    session: aiohttp.ClientSession,
    url: str,
    channel: grpc.aio.Channel,
    batch: list[FuzzInput],
    seen_http: Counter[str],
    seen_grpc: Counter[str],
    unexpected: list[str],
) -> None:
    http_items = [i for i in batch if i.protocol == "http"]
    grpc_items = [i for i in batch if i.protocol == "grpc"]
    results = await asyncio.gather(
        *(_http(session, url, i) for i in http_items), *(_grpc(channel, i) for i in grpc_items)
    )
    for item, status in zip(http_items, results[: len(http_items)], strict=True):
        assert isinstance(status, int)
        outcome = HTTP_OUTCOME.get(status)
        if outcome is None:
            unexpected.append(
                f"HTTP {status} for {item.content_type!r} {item.encoding!r} "
                f"{len(item.body)} bytes {item.body[:80]!r}"
            )
        else:
            seen_http[outcome] += 1
    for item, code in zip(grpc_items, results[len(http_items) :], strict=True):
        assert isinstance(code, grpc.StatusCode)
        outcome = GRPC_OUTCOME.get(code)
        if outcome is None:
            unexpected.append(f"gRPC {code} for {item.body[:80]!r}")
        else:
            seen_grpc[outcome] += 1
