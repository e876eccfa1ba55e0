"""GenAI events sent as OTLP log records, through the real pipeline: joined to their span
whichever arrives first (also after the conversation was evaluated: a revision), events
whose span never comes counted when given up, durable like spans (stored logs requests
replayed on restart, state files of the previous schema upgraded)."""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
from pathlib import Path

import pytest
from _logs_support import Truth, export_logs_with, genai_run, rebuilt
from _pipeline_support import Harness, reference, reference_set
from _receiver_support import export_with
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import (
    OTLPLogExporter as GrpcLogExporter,
)
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http._log_exporter import (
    OTLPLogExporter as HttpLogExporter,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
    OTLPSpanExporter as HttpSpanExporter,
)
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import (
    InMemoryLogRecordExporter,
    LogRecordExporter,
    LogRecordExportResult,
    SimpleLogRecordProcessor,
)
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from tracepass.collector.config import ReceiverConfig
from tracepass.collector.normalize import normalize_logs_request, normalize_request
from tracepass.collector.pipeline import assemble_offline
from tracepass.collector.receiver import ReceiverServers
from tracepass.collector.receiver.otlpfile import read_otlp_file
from tracepass.collector.receiver.recording import RecordingSink as FileRecorder
from tracepass.collector.state import StateStore, StoredConversation
from tracepass.collector.state.store import SCHEMA_VERSION

pytestmark = pytest.mark.timeout(120)

IDLE = 60.0
DATA = Path(__file__).resolve().parents[1] / "data" / "state"


def _truths(h: Harness) -> list[list[Truth]]:
    return [rebuilt(conv.turns) for conv, _, _ in h.evaluator.calls]


@pytest.mark.parametrize("protocol", ["grpc", "http"])
@pytest.mark.parametrize("logs_first", [True, False], ids=["logs-first", "traces-first"])
async def test_real_exporters_events_join_their_spans_whichever_arrives_first(
    protocol: str, logs_first: bool
) -> None:
    h = Harness(None, idle_timeout_s=IDLE)
    pipeline = await h.start()
    run = genai_run("conv-ordered")
    config = ReceiverConfig(host="127.0.0.1", grpc_port=0, http_port=0)
    async with ReceiverServers(pipeline, h.metrics.instruments, config) as servers:
        span_exporter: SpanExporter
        log_exporter: LogRecordExporter
        if protocol == "grpc":
            at = f"127.0.0.1:{servers.grpc_port}"
            span_exporter = GrpcSpanExporter(endpoint=at, insecure=True)
            log_exporter = GrpcLogExporter(endpoint=at, insecure=True)
        else:
            at = f"http://127.0.0.1:{servers.http_port}"
            span_exporter = HttpSpanExporter(endpoint=f"{at}/v1/traces")
            log_exporter = HttpLogExporter(endpoint=f"{at}/v1/logs")

        async def send_logs() -> None:
            result = await asyncio.to_thread(export_logs_with, log_exporter, run.logs)
            assert result == LogRecordExportResult.SUCCESS

        async def send_spans() -> None:
            result = await asyncio.to_thread(export_with, span_exporter, run.spans)
            assert result == SpanExportResult.SUCCESS

        for send in (send_logs, send_spans) if logs_first else (send_spans, send_logs):
            await send()
    h.clock.advance(IDLE + 1)
    await pipeline.process_due()
    assert _truths(h) == [run.truth]
    assert h.evaluator.calls[0][0].id == "conv-ordered"
    assert h.metrics.value("tracepass_log_records_received", protocol=protocol) == len(run.logs)
    assert h.metrics.value("tracepass_log_records_ignored") == 1  # the plain log line
    assert h.metrics.value("tracepass_log_records_rejected") == 0
    events = len(run.logs) - 1
    assert h.metrics.value("tracepass_spans_read", convention="genai_log_events") == events
    await pipeline.stop()


@pytest.mark.parametrize("logs_first", [True, False], ids=["logs-first", "traces-first"])
async def test_reference_turns_completion_reads_the_query_from_log_events(
    logs_first: bool,
) -> None:
    """The reference's turn count closes the conversation as soon as its turns are in,
    also when the query that matches the reference is only in a log event."""
    run = genai_run("conv-early")
    refs = [reference_set("r", reference("events", [t.query for t in run.truth]))]
    h = Harness(None, references=refs, idle_timeout_s=IDLE)
    pipeline = await h.start()
    first, second = (
        (pipeline.ingest_logs(run.logs_request()), pipeline.ingest(run.traces_request()))
        if logs_first
        else (pipeline.ingest(run.traces_request()), pipeline.ingest_logs(run.logs_request()))
    )
    await first
    await pipeline.process_due()
    assert h.evaluator.calls == []
    await second
    await pipeline.process_due()  # the clock has not moved: no idle timeout
    assert _truths(h) == [run.truth]
    assert h.results[0][1].reason == "reference_turns"
    await pipeline.stop()


async def test_an_event_without_span_ids_is_rejected_as_a_partial_success() -> None:
    h = Harness(None, idle_timeout_s=IDLE)
    pipeline = await h.start()
    provider = LoggerProvider()
    out = InMemoryLogRecordExporter()
    provider.add_log_record_processor(SimpleLogRecordProcessor(out))
    # No span is current: the record carries no trace or span id.
    provider.get_logger("t").emit(event_name="gen_ai.user.message", body={"content": "hi"})
    provider.get_logger("t").emit(body="not an event")
    provider.shutdown()
    result = await pipeline.ingest_logs(encode_logs(out.get_finished_logs()))
    assert (result.accepted, result.rejected) == (0, 1)
    assert "gen_ai.user.message" in result.message
    assert h.metrics.value("tracepass_log_records_rejected", reason="event_without_span") == 1
    assert h.metrics.value("tracepass_log_records_ignored") == 1
    assert h.metrics.value("tracepass_spans_rejected") == 0
    await pipeline.stop()


async def test_events_after_evaluation_reopen_the_conversation_as_a_revision() -> None:
    h = Harness(None, idle_timeout_s=IDLE)
    pipeline = await h.start()
    run = genai_run("conv-late")
    await pipeline.ingest(run.traces_request())
    h.clock.advance(IDLE + 1)
    await pipeline.process_due()
    ((first, _, _),) = h.evaluator.calls
    assert [t.query for t in first.turns] == [None, None]  # content only in the logs
    await pipeline.ingest_logs(run.logs_request())
    h.clock.advance(IDLE + 1)
    await pipeline.process_due()
    assert _truths(h)[1] == run.truth
    assert h.results[1][1].revision == 1
    await pipeline.stop()


async def test_events_wait_for_spans_past_the_idle_timeout() -> None:
    """A buffer of events alone is not a conversation: it outlives the idle timeout (up
    to `retention_s`) so that spans naming their conversation still take it in."""
    h = Harness(None, idle_timeout_s=IDLE, retention_s=600)
    pipeline = await h.start()
    run = genai_run("conv-slow-spans")
    await pipeline.ingest_logs(run.logs_request())
    for _ in range(5):
        h.clock.advance(IDLE + 1)
        await pipeline.process_due()
    assert h.evaluator.calls == []
    await pipeline.ingest(run.traces_request())
    h.clock.advance(IDLE + 1)
    await pipeline.process_due()
    assert _truths(h) == [run.truth]
    assert h.metrics.value("tracepass_log_events_dropped") == 0
    await pipeline.stop()


async def test_events_whose_span_never_arrives_are_counted_and_deleted_when_given_up(
    tmp_path: Path,
) -> None:
    h = Harness(tmp_path, idle_timeout_s=IDLE, retention_s=120)
    pipeline = await h.start()
    # A conversation whose spans arrived, plus events for a span that never does.
    joined, orphaned = genai_run("conv-kept", turns=1), genai_run("conv-lost", turns=1)
    await pipeline.ingest(joined.traces_request())
    await pipeline.ingest_logs(joined.logs_request())
    await pipeline.ingest_logs(orphaned.logs_request())
    lost, _ = normalize_logs_request(orphaned.logs_request())
    lost_ids = {(r.trace_id, r.span_id) for r in lost}
    h.clock.advance(IDLE + 1)
    await pipeline.process_due()
    # Only the conversation with spans is evaluated; events alone are nothing to score.
    assert [conv.id for conv, _, _ in h.evaluator.calls] == ["conv-kept"]
    assert h.metrics.value("tracepass_log_events_dropped") == 0  # a late span may still come
    assert pipeline.store is not None
    assert lost_ids <= {(r.trace_id, r.span_id) for c in _load(pipeline.store) for r in c.records}
    h.clock.advance(121)
    await pipeline.process_due()
    assert h.metrics.value("tracepass_log_events_dropped", reason="no_span") == len(lost)
    # Given up means gone from the state file too: a restart does not bring them back.
    stored = {(r.trace_id, r.span_id) for c in _load(pipeline.store) for r in c.records}
    assert not lost_ids & stored
    await pipeline.stop()


async def test_acknowledged_log_events_are_recovered_after_a_restart(tmp_path: Path) -> None:
    run = genai_run("conv-durable")
    h = Harness(tmp_path, idle_timeout_s=IDLE)
    pipeline = await h.start()
    await pipeline.ingest_logs(run.logs_request())  # batch durability: committed on return
    assert pipeline.store is not None
    stored = {(r.trace_id, r.span_id) for c in _load(pipeline.store) for r in c.records}
    events, _ = normalize_logs_request(run.logs_request())
    assert {(r.trace_id, r.span_id) for r in events} <= stored
    await pipeline.stop()

    h2 = Harness(tmp_path, idle_timeout_s=IDLE)
    h2.clock.t = h.clock.t + 1
    pipeline = await h2.start()
    await pipeline.ingest(run.traces_request())
    h2.clock.advance(IDLE + 1)
    await pipeline.process_due()
    assert _truths(h2) == [run.truth]
    await pipeline.stop()


def _load(store: StateStore) -> list[StoredConversation]:
    return store.load(normalize_request, normalize_logs_request)


async def test_state_file_of_schema_2_is_upgraded_to_hold_logs_requests(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.sqlite"
    shutil.copy(DATA / "results_view_format.sqlite", path)
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT value FROM meta").fetchone() == ("2",)
    run = genai_run("conv-upgraded", turns=1)
    h = Harness(tmp_path, idle_timeout_s=IDLE)
    pipeline = await h.start()
    await pipeline.ingest_logs(run.logs_request())
    await pipeline.ingest(run.traces_request())
    await pipeline.stop()
    with sqlite3.connect(path) as conn:
        # Upgraded to the current schema (3 added the signal column; later ones keep it).
        assert conn.execute("SELECT value FROM meta").fetchone() == (str(SCHEMA_VERSION),)
        signals = [s for (s,) in conn.execute("SELECT signal FROM requests ORDER BY id")]
    assert signals == ["logs", "traces"]
    h2 = Harness(tmp_path, idle_timeout_s=IDLE)
    h2.clock.t = h.clock.t + 1
    pipeline = await h2.start()
    h2.clock.advance(IDLE + 1)
    await pipeline.process_due()
    assert _truths(h2) == [run.truth]
    await pipeline.stop()


async def test_serve_record_writes_logs_requests_that_the_file_reader_joins(
    tmp_path: Path,
) -> None:
    """`serve --record`: logs requests are recorded beside the traces (as OTLP/JSON
    frames) and a recording replays into the same conversations."""
    h = Harness(None, idle_timeout_s=IDLE)
    pipeline = await h.start()
    recorder = FileRecorder(pipeline, tmp_path / "rec", max_file_bytes=1 << 20)
    run = genai_run("conv-recorded")
    await recorder.ingest_logs(run.logs_request())
    await recorder.ingest(run.traces_request())
    recorder.close()
    await pipeline.stop()
    (path,) = sorted((tmp_path / "rec").glob("traces-*.binpb"))
    assert list(read_otlp_file(path)) == [run.logs_request(), run.traces_request()]
    (conv,) = assemble_offline(read_otlp_file(path))
    assert rebuilt(conv.turns) == run.truth


def test_offline_events_without_their_span_are_reported(caplog: pytest.LogCaptureFixture) -> None:
    run, alone = genai_run("conv-file"), genai_run("conv-file-orphan", turns=1)
    with caplog.at_level("WARNING"):
        (conv,) = assemble_offline([run.traces_request(), run.logs_request(), alone.logs_request()])
    assert rebuilt(conv.turns) == run.truth
    events = len(normalize_logs_request(alone.logs_request())[0])
    assert f"{events} GenAI log events name a span that is not in the input" in caplog.text
