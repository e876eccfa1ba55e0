"""Read traces from OTLP files, whatever wrote them, detected by content (never by name).

Formats, as the OpenTelemetry Collector `file` exporter and other tools write them:

* JSON lines: one `ExportTraceServiceRequest` / `TracesData` OTLP/JSON object per line
  (file exporter, `format: json`); lines holding `resourceLogs` (logs export requests:
  GenAI events sent as log records) are read too and yielded as
  `ExportLogsServiceRequest`s, to be joined to their spans. More generally any sequence of JSON documents, so a
  single pretty-printed document, or several concatenated, read the same way; a
  top-level array holds several documents.
* Length-prefixed protobuf: each message preceded by its size as a 4-byte big-endian
  unsigned integer (file exporter `format: proto`, and any format with `compression:
  zstd`, where each message is zstd-compressed before being prefixed). A frame holding
  JSON is an OTLP/JSON document, traces or logs (`tracepass serve --record` writes logs
  requests that way: a protobuf frame cannot say which signal it is).
* A single bare protobuf message (starts with the `resource_spans` tag byte 0x0a).
* Any of the above gzip- or zstd-compressed as a whole file.

Errors name the file and the line (JSON) or byte offset and frame index (binary).
"""

from __future__ import annotations

import gzip
import io
import json
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracepass.collector.receiver.decode import InvalidPayload, decode_protobuf
from tracepass.collector.receiver.otlp_json import OtlpJsonError, decode_json_object
from tracepass.collector.receiver.otlp_json_logs import decode_logs_json_object, is_logs_document

# A trace export request, or a logs one (JSON only: binary frames are read as traces).
OtlpFileRequest = ExportTraceServiceRequest | ExportLogsServiceRequest

__all__ = ["OtlpFileError", "OtlpFileRequest", "read_otlp_bytes", "read_otlp_file"]

_GZIP_MAGIC = b"\x1f\x8b"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_JSON_WS = " \t\r\n"


# What a file must hold, said whenever one holds something else.
EXPECTED_FORMATS = (
    "expected OTLP traces: OTLP/JSON (one ExportTraceServiceRequest per line, as the "
    "OpenTelemetry Collector's file exporter writes, or one JSON document), length-prefixed "
    "OTLP protobuf frames, or one protobuf ExportTraceServiceRequest, optionally gzip- or "
    "zstd-compressed"
)
_OTLP_KEYS = ("resourceSpans", "resource_spans", "resourceLogs", "resource_logs")


class OtlpFileError(ValueError):
    """An OTLP file that cannot be read; the message starts with `file:line:` or
    `file: byte N:`."""


def read_otlp_file(path: str | Path) -> Iterator[OtlpFileRequest]:
    """Yield every export request in the file, in file order."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise OtlpFileError(f"{p}: cannot read: {exc.strerror}") from None
    yield from read_otlp_bytes(data, str(p))


def read_otlp_bytes(data: bytes, name: str = "<bytes>") -> Iterator[OtlpFileRequest]:
    if data.startswith(_GZIP_MAGIC):
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise OtlpFileError(f"{name}: corrupt gzip file: {exc}") from None
        yield from read_otlp_bytes(data, f"{name} (gunzipped)")
        return
    if data.startswith(_ZSTD_MAGIC):
        yield from read_otlp_bytes(_unzstd(data, name), f"{name} (zstd-decompressed)")
        return
    head = data.lstrip()
    if head.startswith(b"\xef\xbb\xbf"):  # UTF-8 byte order mark
        head = head[3:].lstrip()
        data = data[data.index(b"\xef\xbb\xbf") + 3 :]
    if not head:
        return
    if head[:1] in (b"{", b"["):
        yield from _json_documents(data, name)
    elif data[:1] == b"\x0a":
        yield _protobuf(data, f"{name}: single protobuf message")
    else:
        yield from _frames(data, name)


def _unzstd(data: bytes, name: str) -> bytes:
    try:
        import zstandard
    except ImportError:
        raise OtlpFileError(
            f"{name}: zstd-compressed, which needs the 'zstandard' package (pip install zstandard)"
        ) from None
    try:
        reader = zstandard.ZstdDecompressor().stream_reader(
            io.BytesIO(data), read_across_frames=True
        )
        out: bytes = reader.read()
        return out
    except zstandard.ZstdError as exc:
        raise OtlpFileError(f"{name}: corrupt zstd data: {exc}") from None


def _protobuf(data: bytes, where: str) -> ExportTraceServiceRequest:
    try:
        return decode_protobuf(data)
    except InvalidPayload as exc:
        raise OtlpFileError(f"{where}: {exc}") from None


def _json_documents(data: bytes, name: str) -> Iterator[OtlpFileRequest]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise OtlpFileError(f"{name}:{line}: not UTF-8 (byte {exc.start}): {exc.reason}") from None
    decoder = json.JSONDecoder()
    idx, n = 0, len(text)
    line, line_at = 1, 0  # line number of position line_at, advanced lazily
    while True:
        while idx < n and text[idx] in _JSON_WS:
            idx += 1
        if idx >= n:
            return
        line += text.count("\n", line_at, idx)
        line_at = idx
        try:
            obj, end = decoder.raw_decode(text, idx)
        except json.JSONDecodeError as exc:
            raise OtlpFileError(
                f"{name}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}"
            ) from None
        docs: list[Any] = obj if isinstance(obj, list) else [obj]
        for i, doc in enumerate(docs):
            item = f" (array item {i})" if isinstance(obj, list) else ""
            _check_otlp_keys(doc, f"{name}:{line}{item}")
            try:
                yield (
                    decode_logs_json_object(doc)
                    if is_logs_document(doc)
                    else decode_json_object(doc)
                )
            except OtlpJsonError as exc:
                raise OtlpFileError(f"{name}:{line}{item}: invalid OTLP/JSON: {exc}") from None
        idx = end


def _check_otlp_keys(doc: Any, where: str) -> None:
    """A JSON object with keys, none of them OTLP's: some other JSON file, not an empty
    export request (OTLP/JSON readers ignore unknown keys, so it would read as nothing)."""
    if type(doc) is dict and doc and not any(key in doc for key in _OTLP_KEYS):
        keys = ", ".join(sorted(map(str, doc))[:5])
        raise OtlpFileError(
            f"{where}: not OTLP: a JSON object with keys {keys} and no resourceSpans; "
            f"{EXPECTED_FORMATS}"
        )


def _first_frame_error(data: bytes, name: str, message: str) -> OtlpFileError:
    """The first frame of a file is already wrong: most likely not an OTLP file at all.
    Text gets said as such (a `.txt`, a CSV); binary keeps the offset; both say what a
    file should hold."""
    preview = data[:24].decode("utf-8", "replace")
    if preview and all(c.isprintable() or c in _JSON_WS for c in preview):
        return OtlpFileError(
            f"{name}: not an OTLP file (it starts with the text {preview!r}); {EXPECTED_FORMATS}"
        )
    return OtlpFileError(f"{name}: {message}; {EXPECTED_FORMATS}")


def _frames(data: bytes, name: str) -> Iterator[OtlpFileRequest]:
    pos, n, index = 0, len(data), 0
    while pos < n:
        if n - pos < 4:
            message = (
                f"byte {pos}: {n - pos} trailing bytes, too short for a 4-byte length "
                "prefix (not an OTLP file?)"
            )
            if index == 0:
                raise _first_frame_error(data, name, message)
            raise OtlpFileError(f"{name}: {message}")
        size = int.from_bytes(data[pos : pos + 4], "big")
        start = pos + 4
        if start + size > n:
            message = (
                f"byte {pos}: frame {index} declares {size} bytes but only "
                f"{n - start} remain (truncated file, or not a length-prefixed OTLP file)"
            )
            if index == 0:
                raise _first_frame_error(data, name, message)
            raise OtlpFileError(f"{name}: {message}")
        payload = data[start : start + size]
        where = f"{name}: byte {pos}: frame {index}"
        if payload.startswith(_ZSTD_MAGIC):
            payload = _unzstd(payload, where)
        if payload.lstrip()[:1] == b"{":
            try:
                doc = json.loads(payload)
                yield (
                    decode_logs_json_object(doc)
                    if is_logs_document(doc)
                    else decode_json_object(doc)
                )
            except json.JSONDecodeError as exc:
                raise OtlpFileError(f"{where}: invalid JSON: {exc}") from None
            except OtlpJsonError as exc:
                raise OtlpFileError(f"{where}: invalid OTLP/JSON: {exc}") from None
        else:
            yield _protobuf(payload, where)
        pos = start + size
        index += 1
