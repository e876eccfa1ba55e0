"""Seeded generation of hostile OTLP inputs (in-process, no corpus files): mutated
protobuf and OTLP/JSON requests derived from real SDK requests, with compression and
content-type variations. Shared by the fast test and `make reliability`'s long run."""

from __future__ import annotations

import copy
import gzip
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from _receiver_support import make_request, to_otlp_json
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracepass.collector.receiver.otlp_json_logs import encode_logs_json

__all__ = ["FuzzInput", "inputs", "wire_field"]

_WEIRD_STRINGS = [
    "",
    "²",
    "٣",
    "\ud800",
    "\udfff",
    "-",
    "1e400",
    "9" * 5000,
    "-9223372036854775809",
    "18446744073709551616",
    "NaN",
    "Infinity",
    "0x10",
    "SPAN_KIND_NOPE",
    "é" * 100,
    "\x00",
    "zz" * 16,
    "ab" * 8,
]
_WEIRD_VALUES: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    2**64,
    10**400,
    1.5,
    -0.0,
    1e308,
    [],
    {},
    [[[]]],
    {"stringValue": 1},
    {"kvlistValue": {"values": [{"key": "k", "value": {"arrayValue": {}}}]}},
    *_WEIRD_STRINGS,
]


@dataclass(frozen=True)
class FuzzInput:
    body: bytes
    content_type: str
    encoding: str  # Content-Encoding sent ("" for none)
    protocol: str  # "http" or "grpc"
    signal: str = "traces"  # or "logs"


def _pool(rng: random.Random) -> list[ExportTraceServiceRequest]:
    return [make_request(rng.randint(1, 3), f"fuzz-{i}") for i in range(8)]


def _logs_pool(rng: random.Random) -> list[ExportLogsServiceRequest]:
    """GenAI events as OTLP log records (what instrumentations emit), tied to spans."""
    out = []
    for i in range(4):
        request = ExportLogsServiceRequest()
        rl = request.resource_logs.add()
        kv = rl.resource.attributes.add()
        kv.key, kv.value.string_value = "service.name", "fuzz-agent"
        records = rl.scope_logs.add().log_records
        for j in range(rng.randint(1, 4)):
            rec = records.add()
            rec.time_unix_nano = 1_700_000_000_000_000_000 + j
            rec.trace_id, rec.span_id = rng.randbytes(16), rng.randbytes(8)
            rec.event_name = "gen_ai.user.message"
            rec.severity_number = 9
            rec.body.kvlist_value.values.add(key="content").value.string_value = f"q {i} {j}"
            attr = rec.attributes.add()
            attr.key, attr.value.string_value = "gen_ai.conversation.id", f"fuzz-log-{i}"
        out.append(request)
    return out


def _mutate_bytes(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        op = rng.random()
        if not b:
            b.extend(rng.randbytes(rng.randint(1, 64)))
        elif op < 0.3:
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
        elif op < 0.45:
            i = rng.randrange(len(b))
            b[i] = rng.choice((0x00, 0x7F, 0x80, 0xFF, 0x0A, 0x12, 0x1A, 0x22, 0x2A))
        elif op < 0.6:
            i = rng.randrange(len(b))
            del b[i : i + rng.randint(1, 16)]
        elif op < 0.75:
            i = rng.randrange(len(b) + 1)
            b[i:i] = rng.randbytes(rng.randint(1, 16))
        elif op < 0.85:
            del b[rng.randrange(len(b)) :]
        else:
            i, j = sorted(rng.randrange(len(b) + 1) for _ in range(2))
            b[i:i] = b[i:j]  # duplicate a slice (repeated fields, nested lengths)
    return bytes(b)


def wire_field(number: int, payload: bytes) -> bytes:
    """One length-delimited protobuf field, written by hand: the protobuf API cannot
    build messages nested deeper than its own limits."""
    n = len(payload)
    varint = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        varint.append(low | (0x80 if n else 0))
        if not n:
            break
    return bytes([(number << 3) | 2]) + bytes(varint) + payload


def _deep_protobuf(rng: random.Random) -> bytes:
    field = wire_field
    value = field(1, b"x")
    for _ in range(rng.choice((30, 49, 99, 101, 500, 3000))):
        value = (
            field(5, field(1, value)) if rng.random() < 0.5 else field(6, field(1, field(2, value)))
        )
    return field(1, field(2, field(2, field(9, field(1, b"k") + field(2, value)))))


def _paths(doc: Any) -> list[tuple[Any, ...]]:
    """Every path into `doc` (iteratively: mutated documents can nest deeply)."""
    out: list[tuple[Any, ...]] = []
    stack: list[tuple[Any, tuple[Any, ...]]] = [(doc, ())]
    while stack:
        node, path = stack.pop()
        out.append(path)
        if isinstance(node, dict):
            stack.extend((v, (*path, k)) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend((v, (*path, i)) for i, v in enumerate(node))
    return out


def _mutate_json(rng: random.Random, doc: Any) -> Any:
    doc = json.loads(json.dumps(doc))
    nested_once = False
    for _ in range(rng.randint(1, 4)):
        paths = [p for p in _paths(doc) if p]
        if not paths:
            return copy.deepcopy(rng.choice(_WEIRD_VALUES))
        path = rng.choice(paths)
        parent = doc
        for part in path[:-1]:
            parent = parent[part]
        last = path[-1]
        op = rng.random()
        if op < 0.6:
            parent[last] = copy.deepcopy(rng.choice(_WEIRD_VALUES))
        elif op < 0.75 and isinstance(parent, dict):
            del parent[last]
        elif op < 0.85 and isinstance(parent, dict):
            parent[rng.choice(["trace_id", "span_id", "kind", "intValue", "x_y", "values"])] = (
                parent.pop(last)
            )
        elif not nested_once:
            nested_once = True  # one deep value per document keeps it encodable
            nested: Any = copy.deepcopy(rng.choice(_WEIRD_VALUES))
            for _ in range(rng.choice((2, 31, 32, 47, 200))):
                nested = (
                    {"kvlistValue": {"values": [{"key": "k", "value": nested}]}}
                    if rng.random() < 0.5
                    else {"arrayValue": {"values": [nested]}}
                )
            parent[last] = nested
    return doc


def _json_text(rng: random.Random, doc: Any) -> bytes:
    text = json.dumps(doc, ensure_ascii=rng.random() < 0.5)
    if rng.random() < 0.15:
        return _mutate_bytes(rng, text.encode("utf-8", "surrogatepass"))
    return text.encode("utf-8", "surrogatepass")


def inputs(seed: int, count: int) -> Iterator[FuzzInput]:
    """`count` inputs, the same ones for the same seed."""
    rng = random.Random(seed)
    pool = _pool(rng)
    logs = _logs_pool(rng)
    by_signal = {
        "traces": ([r.SerializeToString() for r in pool], [to_otlp_json(r) for r in pool]),
        "logs": (
            [r.SerializeToString() for r in logs],
            [json.loads(encode_logs_json(r)) for r in logs],
        ),
    }
    for _ in range(count):
        protocol = "grpc" if rng.random() < 0.5 else "http"
        signal = "logs" if rng.random() < 0.25 else "traces"
        raw, docs = by_signal[signal]
        kind = rng.random()
        content_type = "application/x-protobuf"
        if kind < 0.08:
            body = rng.choice(raw)  # valid
        elif kind < 0.12:
            body = _deep_protobuf(rng)
        elif kind < 0.16:
            body = rng.randbytes(rng.randint(0, 2048))
        elif protocol == "http" and kind < 0.55:
            content_type = "application/json"
            body = _json_text(rng, _mutate_json(rng, rng.choice(docs)))
        else:
            body = _mutate_bytes(rng, rng.choice(raw))
        encoding = ""
        if protocol == "http":
            r = rng.random()
            if r < 0.1:
                body, encoding = gzip.compress(body, compresslevel=1), "gzip"
            elif r < 0.13:
                encoding = "gzip"  # claimed, not applied: a corrupt stream
            elif r < 0.15:
                encoding = rng.choice(["br", "deflate", "x-gzip, identity"])
            if rng.random() < 0.03:
                content_type = rng.choice(["text/plain", "application/json; charset=latin-1", ""])
        yield FuzzInput(body, content_type, encoding, protocol, signal)
