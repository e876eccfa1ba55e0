"""Bytes → OTLP export requests (traces or logs), shared by the HTTP and gRPC receivers.

Two jobs: decompress under a hard cap on the *decompressed* size, fed chunk by chunk so a
gzip bomb is cut off after at most `cap` bytes of output (zlib's `max_length`), and turn
a protobuf parse failure into a message that says what broke and where (upb only says
"Error parsing message"; the wire walk in `locate_protobuf_error` runs on the error
path only).
"""

from __future__ import annotations

import zlib
from typing import TypeVar, cast

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError, Message
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

__all__ = [
    "CappedDecompressor",
    "InvalidPayload",
    "PayloadTooLarge",
    "UnsupportedEncoding",
    "count_log_records",
    "count_spans",
    "decode_message",
    "decode_protobuf",
    "locate_protobuf_error",
]


M = TypeVar("M", bound=Message)


class InvalidPayload(ValueError):
    """The request body cannot be decoded (→ HTTP 400 / INVALID_ARGUMENT)."""


class PayloadTooLarge(ValueError):
    """The body exceeds `max_request_bytes` after decompression (→ 413 / RESOURCE_EXHAUSTED)."""


class UnsupportedEncoding(ValueError):
    """A Content-Encoding we do not speak (→ HTTP 415)."""


_CHUNK = 64 * 1024


class CappedDecompressor:
    """Incremental gzip / deflate / identity decoding with a cap on total output.

    `deflate` accepts both zlib-wrapped (RFC 1950, what HTTP means and what the OTel
    exporters send) and raw RFC 1951 streams, told apart by the zlib header check bits.
    Concatenated gzip members are decoded in turn, as `gzip -d` does.
    """

    def __init__(self, encoding: str, cap: int) -> None:
        enc = encoding.strip().lower()
        if enc in ("", "identity"):
            self._mode = "identity"
        elif enc in ("gzip", "x-gzip"):
            self._mode = "gzip"
        elif enc == "deflate":
            self._mode = "deflate"
        else:
            raise UnsupportedEncoding(
                f"unsupported Content-Encoding {encoding!r} (supported: gzip, deflate, identity)"
            )
        self.encoding = self._mode
        self._cap = cap
        self._out: list[bytes] = []
        self._size = 0
        self._compressed = 0
        self._d: zlib._Decompress | None = None
        self._pending = b""  # deflate: bytes held until the header can be sniffed

    @property
    def size(self) -> int:
        return self._size

    def _new(self, first: bytes) -> zlib._Decompress:
        if self._mode == "gzip":
            return zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        zlib_wrapped = (
            len(first) >= 2 and first[0] & 0x0F == 8 and ((first[0] << 8) | first[1]) % 31 == 0
        )
        return zlib.decompressobj(wbits=zlib.MAX_WBITS if zlib_wrapped else -zlib.MAX_WBITS)

    def _emit(self, data: bytes) -> None:
        if data:
            self._size += len(data)
            if self._size > self._cap:
                raise PayloadTooLarge(
                    f"request body exceeds the limit of {self._cap} bytes after decompression"
                )
            self._out.append(data)

    def feed(self, chunk: bytes) -> None:
        if not chunk:
            return
        self._compressed += len(chunk)
        if self._compressed > self._cap:
            raise PayloadTooLarge(
                f"request body exceeds the limit of {self._cap} bytes on the wire"
            )
        if self._mode == "identity":
            self._emit(chunk)
            return
        if self._d is None:
            self._pending += chunk
            if self._mode == "deflate" and len(self._pending) < 2:
                return
            chunk, self._pending = self._pending, b""
            self._d = self._new(chunk)
        self._inflate(chunk)

    def _inflate(self, data: bytes) -> None:
        assert self._d is not None
        while data:
            try:
                # +1 so that "exactly at the cap" and "over the cap" are told apart.
                out = self._d.decompress(data, self._cap - self._size + 1)
            except zlib.error as exc:
                raise InvalidPayload(
                    f"corrupt {self._mode} stream near compressed byte {self._compressed}: {exc}"
                ) from None
            self._emit(out)
            data = self._d.unconsumed_tail
            if self._d.eof:
                rest = self._d.unused_data
                if self._mode == "gzip" and rest.strip(b"\0"):
                    self._d = self._new(rest)
                    data = rest
                else:
                    data = b""
                    if rest:
                        raise InvalidPayload(
                            f"{len(rest)} trailing bytes after the {self._mode} stream"
                        )

    def finish(self) -> bytes:
        if self._mode != "identity":
            if self._d is None:
                if self._pending:
                    raise InvalidPayload(
                        f"truncated {self._mode} stream ({len(self._pending)} bytes)"
                    )
            else:
                self._emit(self._d.flush())
                if not self._d.eof:
                    raise InvalidPayload(
                        f"truncated {self._mode} stream: ended after {self._compressed} compressed bytes"
                    )
        data = b"".join(self._out)
        self._out = [data]
        return data


def decompress(data: bytes, encoding: str, cap: int) -> bytes:
    d = CappedDecompressor(encoding, cap)
    for i in range(0, len(data), _CHUNK):
        d.feed(data[i : i + _CHUNK])
    return d.finish()


def decode_message(data: bytes, message_type: type[M]) -> M:
    """One protobuf export request of either signal; a parse failure says where."""
    try:
        return message_type.FromString(data)
    except DecodeError:
        raise InvalidPayload(
            f"invalid protobuf {message_type.DESCRIPTOR.name}: "
            + locate_protobuf_error(data, cast(Descriptor, message_type.DESCRIPTOR))
        ) from None


def decode_protobuf(data: bytes) -> ExportTraceServiceRequest:
    return decode_message(data, ExportTraceServiceRequest)


def count_spans(request: ExportTraceServiceRequest) -> int:
    return sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)


def count_log_records(request: ExportLogsServiceRequest) -> int:
    return sum(len(sl.log_records) for rl in request.resource_logs for sl in rl.scope_logs)


# --- error location (slow path) --------------------------------------------------------


class _WireError(Exception):
    def __init__(self, offset: int, path: str, what: str) -> None:
        self.offset, self.path, self.what = offset, path, what


def _varint(buf: bytes, pos: int, end: int, path: str) -> tuple[int, int]:
    result = shift = 0
    start = pos
    while True:
        if pos >= end:
            raise _WireError(start, path, "truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise _WireError(start, path, "varint longer than 10 bytes")


def _walk(buf: bytes, pos: int, end: int, desc: Descriptor | None, path: str) -> None:
    counts: dict[int, int] = {}
    while pos < end:
        tag_at = pos
        tag, pos = _varint(buf, pos, end, path)
        number, wire = tag >> 3, tag & 7
        if number == 0:
            raise _WireError(tag_at, path, "field number 0")
        field = desc.fields_by_number.get(number) if desc is not None else None
        name = field.name if field is not None else f"#{number}"
        if field is not None and field.is_repeated:
            idx = counts.get(number, 0)
            counts[number] = idx + 1
            here = f"{path}.{name}[{idx}]" if path else f"{name}[{idx}]"
        else:
            here = f"{path}.{name}" if path else name
        if wire == 0:
            _, pos = _varint(buf, pos, end, here)
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        elif wire == 2:
            length, pos = _varint(buf, pos, end, here)
            if pos + length > end:
                raise _WireError(
                    tag_at,
                    here,
                    f"length {length} runs past the end of its container ({end - pos} bytes left)",
                )
            if field is not None and field.type == FieldDescriptor.TYPE_MESSAGE:
                _walk(buf, pos, pos + length, field.message_type, here)
            elif field is not None and field.type == FieldDescriptor.TYPE_STRING:
                try:
                    buf[pos : pos + length].decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise _WireError(pos + exc.start, here, "string is not valid UTF-8") from None
            pos += length
        elif wire in (3, 4):
            raise _WireError(tag_at, here, "deprecated group wire type")
        else:
            raise _WireError(tag_at, here, f"invalid wire type {wire}")
        if pos > end:
            raise _WireError(tag_at, here, "fixed-width value truncated")


def locate_protobuf_error(
    data: bytes, descriptor: Descriptor = ExportTraceServiceRequest.DESCRIPTOR
) -> str:
    """Describe where `data` stops being a valid message of `descriptor`."""
    try:
        _walk(data, 0, len(data), descriptor, "")
    except _WireError as err:
        where = f" in {err.path}" if err.path else ""
        return f"{err.what} at byte {err.offset}{where} ({len(data)} bytes total)"
    return f"rejected by the protobuf parser ({len(data)} bytes total)"
