"""Bedrock Agents' `invoke_agent` answer as the service sends it: an AWS event stream.

Why: botocore's `Stubber` queues plain dicts validated against the service model, but an
event-stream member (`completion`) is, on the wire, a sequence of binary messages that
botocore decodes lazily with a `botocore.eventstream.EventStream`; the OpenInference
instrumentation wraps that object and reads the events as the application iterates it.
So each event is validated here against the `completion` shape (what `Stubber` would do
for a plain member), encoded in the `application/vnd.amazon.eventstream` framing
(prelude, string headers, JSON payload, CRC32s), and handed to botocore's own
`EventStream` and rest-json event parser: what the application reads is what botocore
decodes from those bytes.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import json
import struct
from collections.abc import Iterator, Sequence
from typing import Any

_STRING_HEADER = 7


def _header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode(), value.encode()
    return (
        struct.pack("!B", len(raw_name))
        + raw_name
        + struct.pack("!BH", _STRING_HEADER, len(raw_value))
        + raw_value
    )


def encode_message(event_type: str, payload: bytes) -> bytes:
    """One event-stream message: total and header lengths, prelude CRC, headers, payload,
    message CRC (the framing botocore's `EventStreamBuffer` decodes)."""
    headers = (
        _header(":message-type", "event")
        + _header(":event-type", event_type)
        + _header(":content-type", "application/json")
    )
    total = 12 + len(headers) + len(payload) + 4
    prelude = struct.pack("!II", total, len(headers))
    prelude += struct.pack("!I", binascii.crc32(prelude) & 0xFFFFFFFF)
    body = prelude + headers + payload
    return body + struct.pack("!I", binascii.crc32(body) & 0xFFFFFFFF)


def _wire(value: Any) -> Any:
    """A member value as rest-json puts it on the wire (blobs base64, times ISO 8601)."""
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, datetime.datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {k: _wire(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_wire(v) for v in value]
    return value


class _RawBody:
    """The part of urllib3's response `EventStream` reads: `stream()` yields the bytes."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def stream(self, amt: int = 1024) -> Iterator[bytes]:
        for start in range(0, len(self._data), amt):
            yield self._data[start : start + amt]

    def close(self) -> None:
        """Nothing to release: the bytes are in memory."""


def completion_stream(client: Any, operation: str, events: Sequence[dict[str, Any]]) -> Any:
    """A real `botocore.eventstream.EventStream` over `events` (each `{event_type: value}`),
    validated against the operation's event-stream member and encoded on the wire."""
    from botocore.eventstream import EventStream
    from botocore.parsers import create_parser
    from botocore.validate import validate_parameters

    model = client.meta.service_model
    output = model.operation_model(operation).output_shape
    stream_shape = next(m for m in output.members.values() if m.serialization.get("eventstream"))
    data = b""
    for event in events:
        validate_parameters(event, stream_shape)
        ((event_type, value),) = event.items()
        data += encode_message(event_type, json.dumps(_wire(value)).encode())
    parser = create_parser(model.protocol)._event_stream_parser
    return EventStream(_RawBody(data), stream_shape, parser, operation)
