"""`RecordingSpanExporter`: finished spans as OTLP/JSON lines in a local file.

Why a file: CI gates and offline evaluation (`tracepass evaluate traces.jsonl`) need the
traces of a run without running a collector. The file has the shape the OpenTelemetry
Collector's `file` exporter writes (`format: json`): one `ExportTraceServiceRequest` per
line in OTLP/JSON, trace and span ids in hex as the OTLP/JSON specification requires (the
protobuf library's generic JSON writer would put them in base64, which OTLP/JSON readers
refuse). Encoding is the OTLP exporter's own encoder, so the content is exactly what the
network exporters would send.

Lines are appended and flushed per export batch: a crash loses at most the batch being
written, and several processes may append to one file (each line is one `write` call).
"""

from __future__ import annotations

import base64
import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

RECORD_FILE_ENV = "TRACEPASS_RECORD_FILE"
RECORD_EXTRA_HINT = "pip install 'tracepass-instrumentation[record]'"

_ID_FIELDS = frozenset({"traceId", "spanId", "parentSpanId"})


def _hex_ids(node: Any) -> Any:
    if isinstance(node, dict):
        return {
            key: base64.b64decode(value).hex()
            if key in _ID_FIELDS and isinstance(value, str)
            else _hex_ids(value)
            for key, value in node.items()
        }
    if isinstance(node, list):
        return [_hex_ids(value) for value in node]
    return node


def _encoder() -> Any:
    try:
        from google.protobuf.json_format import MessageToDict
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    except ImportError as exc:  # the [record] extra is not installed
        raise ImportError(
            f"recording traces to a file needs the OTLP encoder: {RECORD_EXTRA_HINT}"
        ) from exc

    def encode(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
        document: dict[str, Any] = _hex_ids(MessageToDict(encode_spans(spans)))
        return document

    return encode


class RecordingSpanExporter(SpanExporter):
    """Append each export batch to `path` as one OTLP/JSON line."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._encode = _encoder()
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("a", encoding="utf-8")
        self._lock = threading.Lock()
        self._closed = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if not spans:
            return SpanExportResult.SUCCESS
        line = json.dumps(self._encode(spans), separators=(",", ":")) + "\n"
        with self._lock:
            if self._closed:
                return SpanExportResult.FAILURE
            self._file.write(line)
            self._file.flush()
        return SpanExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        with self._lock:
            if not self._closed:
                self._file.flush()
        return True

    def shutdown(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._file.close()
