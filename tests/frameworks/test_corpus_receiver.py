"""The corpora whose content lives in OTLP log records (Google ADK's native tracing puts
messages, tool arguments and results only in `gen_ai.client.inference.operation.details`
log records), POSTed line by line as OTLP/JSON to a live collector — `/v1/traces` and
`/v1/logs` — in file order and with the logs first, rebuild the conversations their
script dictated: the live receiver path, not only the file reader, joins log events to
their spans."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from test_corpus import CORPUS, KNOWN_GAPS, compare

from tracepass.collector.config import AssemblyConfig, ReceiverConfig
from tracepass.collector.pipeline import Pipeline
from tracepass.collector.receiver import ReceiverServers
from tracepass.evaluator.models import Conversation, ConversationResult, Reference

pytestmark = pytest.mark.timeout(120)

WITH_LOGS = sorted(
    p.name.removesuffix(".otlp.jsonl")
    for p in CORPUS.glob("*.otlp.jsonl")
    if '"resourceLogs"' in p.read_text(encoding="utf-8")
    and (CORPUS / p.name.replace(".otlp.jsonl", ".expected.json")).exists()
    # A scenario whose spans cannot give the truth is recorded once, in test_corpus.py.
    and p.name.removesuffix(".otlp.jsonl") not in KNOWN_GAPS
)


class Capture:
    """The pipeline's evaluator, reduced to keeping the conversations it is handed."""

    def __init__(self) -> None:
        self.conversations: list[Conversation] = []

    async def aevaluate(
        self,
        conversation: Conversation,
        reference: Reference | None,
        *,
        reference_set: str | None = None,
    ) -> ConversationResult | None:
        self.conversations.append(conversation)
        return None


class Clock:
    t = 1_000.0

    def __call__(self) -> float:
        return self.t


def _documents(path: Path, logs_first: bool) -> list[tuple[str, str]]:
    """(endpoint, body) per non-empty line, in file order or every logs line first."""
    docs = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            endpoint = "/v1/logs" if "resourceLogs" in json.loads(line) else "/v1/traces"
            docs.append((endpoint, line))
    if logs_first:
        docs.sort(key=lambda d: d[0] != "/v1/logs")
    return docs


def test_there_are_corpora_with_logs() -> None:
    assert "adk_native" in WITH_LOGS


@pytest.mark.parametrize("logs_first", [False, True], ids=["file-order", "logs-first"])
@pytest.mark.parametrize("scenario", WITH_LOGS)
async def test_corpus_posted_over_http_rebuilds_the_scripted_conversations(
    scenario: str, logs_first: bool
) -> None:
    expected: dict[str, Any] = json.loads((CORPUS / f"{scenario}.expected.json").read_text())
    capture, clock = Capture(), Clock()
    pipeline = Pipeline(capture, assembly=AssemblyConfig(idle_timeout_s=60), clock=clock)  # type: ignore[arg-type]
    await pipeline.start(background=False)
    config = ReceiverConfig(host="127.0.0.1", grpc_port=0, http_port=0, grpc_enabled=False)
    async with (
        ReceiverServers(pipeline, pipeline.instruments, config) as servers,
        aiohttp.ClientSession() as client,
    ):
        for endpoint, body in _documents(CORPUS / f"{scenario}.otlp.jsonl", logs_first):
            async with client.post(
                f"http://127.0.0.1:{servers.http_port}{endpoint}",
                data=body,
                headers={"Content-Type": "application/json"},
            ) as resp:
                assert resp.status == 200, await resp.text()
                answer = await resp.json()
                assert "partialSuccess" not in answer, answer
    clock.t += 61
    await pipeline.process_due()
    await pipeline.stop()
    convs = sorted(
        (c for c in capture.conversations if c.turns),
        key=lambda c: (min((t.start_ns or 0 for t in c.turns), default=0), c.id),
    )
    problems = compare(convs, expected)
    assert not problems, f"{scenario}:\n  " + "\n  ".join(problems)
