"""OTLP/JSON → `ExportTraceServiceRequest`, written by hand instead of `json_format`.

Why not `google.protobuf.json_format.ParseDict`: OTLP/JSON deviates from the proto3 JSON
mapping (trace/span ids are *hex*, not base64), and `ParseDict` silently decodes a
32-character hex id as base64 into 24 wrong bytes. Walking the known trace schema
ourselves fixes that, gives error messages with the exact JSON path
(`resourceSpans[0].scopeSpans[1].spans[7].traceId: ...`), and is several times faster
than `ParseDict` (see `bench/bench_decode.py`).

Accepted leniently, as receivers must: int64/uint64 as JSON numbers or decimal strings,
enums as integers or their proto names, lowerCamelCase or original snake_case keys,
unknown keys ignored. Ids: hex of exactly 16 (trace) / 8 (span) bytes, or empty.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import functools
import json
import math
from collections.abc import Callable
from typing import Any

import orjson
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from tracepass.evaluator.bounded_cache import BoundedCache

__all__ = [
    "TRACES",
    "JsonSignal",
    "OtlpJsonError",
    "check_signal",
    "decode_json_bytes",
    "decode_json_object",
    "decode_signal_object",
    "parse_json",
]

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
_UINT64_MAX = 2**64 - 1
_UINT32_MAX = 2**32 - 1
_MAX_INT_CHARS = 21  # "-9223372036854775808" and "18446744073709551615" are 20

# upb (the protobuf runtime) refuses to decode messages nested deeper than 100 levels,
# and accepted requests are stored as protobuf and decoded again on recovery: a value
# nested deeper would be acknowledged, then lost. A kvlist level costs 3 message levels
# (AnyValue → KeyValueList → KeyValue), an array level 2; the envelope above an
# attribute value takes up to 7, so the budget below it is 93: 31 kvlist or 46 array
# levels (tests/collector/test_receiver_json.py checks every place attributes live).
MAX_VALUE_DEPTH = 93
_KVLIST_COST = 3
_ARRAY_COST = 2


class OtlpJsonError(ValueError):
    """A payload that is not valid OTLP/JSON. `path` is the JSON path of the offending
    value (empty for document-level problems); `str()` is the full precise message."""

    def __init__(self, reason: str, path: str = "") -> None:
        self.reason = reason
        self._segments: list[str] = [path] if path else []
        super().__init__(reason)

    def prepend(self, segment: str) -> OtlpJsonError:
        self._segments.insert(0, segment)
        return self

    @property
    def path(self) -> str:
        out = ""
        for seg in self._segments:
            out += seg if seg.startswith("[") or not out else "." + seg
        return out

    def __str__(self) -> str:
        path = self.path
        return f"{path}: {self.reason}" if path else self.reason


def _fast_loads(data: bytes | str) -> Any:
    """orjson (about 1.7x faster than `json`). On any orjson failure the stdlib parser
    runs again so error messages (and the acceptance of integers beyond 64 bits,
    range-checked later) do not depend on it."""
    try:
        return orjson.loads(data)
    except (ValueError, TypeError):
        pass
    return json.loads(data)


def parse_json(data: bytes | str) -> Any:
    """The JSON value of a request body; syntax errors say line and column."""
    try:
        return _fast_loads(data)
    except json.JSONDecodeError as exc:
        raise OtlpJsonError(
            f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    except UnicodeDecodeError as exc:
        raise OtlpJsonError(f"body is not UTF-8 (byte {exc.start}): {exc.reason}") from None
    except RecursionError:
        raise OtlpJsonError("JSON nested too deeply for the parser") from None
    except ValueError as exc:  # e.g. an integer literal beyond Python's 4,300-digit limit
        raise OtlpJsonError(f"invalid JSON: {exc}") from None


def decode_json_bytes(data: bytes | str) -> ExportTraceServiceRequest:
    """Parse one OTLP/JSON `ExportTraceServiceRequest` (or `TracesData`) document."""
    return decode_json_object(parse_json(data))


# The top-level array of each OTLP signal's document, and the signal's name.
_SIGNAL_KEYS = {
    "resourceSpans": "traces",
    "resource_spans": "traces",
    "resourceLogs": "logs",
    "resource_logs": "logs",
    "resourceMetrics": "metrics",
    "resource_metrics": "metrics",
}


def check_signal(obj: dict[str, Any], expected: str) -> None:
    """A document without the expected signal's array: refuse it if it is another
    signal's (it would otherwise decode as an empty request, acknowledged and lost)."""
    for key, signal in _SIGNAL_KEYS.items():
        if signal != expected and key in obj:
            raise OtlpJsonError(
                f"this is an OTLP {signal} document, not {expected} (wrong endpoint?)", key
            )


def decode_json_object(obj: Any) -> ExportTraceServiceRequest:
    """Build the request from an already parsed JSON value."""
    request = ExportTraceServiceRequest()
    decode_signal_object(obj, TRACES, request)
    return request


# --- the envelope every signal shares ----------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class JsonSignal:
    """What differs between the OTLP/JSON documents of two signals: the names of the
    three nested arrays (`resourceSpans` / `scopeSpans` / `spans` for traces) and the
    reader of one item. Everything else (resources, scopes, values, leniency, limits,
    error paths) is this module's, the same for every signal."""

    name: str  # "traces", "logs": what `check_signal` calls it
    resources: str  # lowerCamelCase JSON names; the proto field is the snake_case one
    scopes: str
    items: str
    read_item: Callable[[Any, Any], None]  # (JSON value, message to fill)
    # Derived once: the top array's proto field and the readers of the two envelope
    # levels (a resource with its scopes, a scope with its items).
    resources_field: str = dataclasses.field(init=False)
    read_resource: Callable[[Any, Any], None] = dataclasses.field(init=False)
    read_scope: Callable[[Any, Any], None] = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        read_scope = _level_reader("scope", _scope, self.items, self.read_item)
        derived = {
            "resources_field": _snake(self.resources),
            "read_resource": _level_reader("resource", _resource, self.scopes, read_scope),
            "read_scope": read_scope,
        }
        for name, value in derived.items():
            object.__setattr__(self, name, value)


def decode_signal_object(obj: Any, signal: JsonSignal, request: Any) -> None:
    """Fill `request` (the signal's export request) from an already parsed JSON value:
    the one walk of the OTLP/JSON envelope, for every signal."""
    if type(obj) is not dict:
        raise OtlpJsonError(f"expected a JSON object at top level, got {_kind(obj)}")
    items = obj.get(signal.resources)
    if items is None:
        items = obj.get(signal.resources_field)
    if items is None:
        check_signal(obj, signal.name)
        return
    if type(items) is not list:
        raise OtlpJsonError(f"expected an array, got {_kind(items)}", signal.resources)
    out = getattr(request, signal.resources_field)
    _read_each(items, signal.resources, out, signal.read_resource)


def _read_each(items: list[Any], field: str, out: Any, read: Callable[[Any, Any], None]) -> None:
    """`read` each JSON item into a new message of the repeated field `out`; an error
    names the item's place (`field[i]`)."""
    for i, item in enumerate(items):
        try:
            read(item, out.add())
        except OtlpJsonError as exc:
            raise exc.prepend(f"[{i}]").prepend(field) from None
        except UnicodeEncodeError:
            raise _surrogate().prepend(f"[{i}]").prepend(field) from None


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name)


def _level_reader(
    head: str,
    read_head: Callable[[dict[str, Any], Any], None],
    children: str,
    read_child: Callable[[Any, Any], None],
) -> Callable[[Any, Any], None]:
    """The reader of one envelope level: `head` (`resource` or `scope`, read by
    `read_head`), `schemaUrl`, and the array `children` (each read by `read_child`).
    Its fixed arguments are bound once, positionally, so a call merges no keywords."""
    keys = frozenset({head, children, "schemaUrl"})
    return functools.partial(
        _envelope_level, keys, head, read_head, children, _snake(children), read_child
    )


def _envelope_level(
    keys: frozenset[str],
    head: str,
    read_head: Callable[[dict[str, Any], Any], None],
    children: str,
    children_field: str,
    read_child: Callable[[Any, Any], None],
    d: Any,
    msg: Any,
) -> None:
    """One `ResourceSpans` / `ResourceLogs` (the resource and its scopes) or one
    `ScopeSpans` / `ScopeLogs` (the scope and its items): the same walk at both levels."""
    d = _normalized(_obj(d, ""), keys)
    if (value := d.get(head)) is not None:
        read_head(_obj(value, head), getattr(msg, head))
    if (url := d.get("schemaUrl")) is not None:
        msg.schema_url = _str(url, "schemaUrl")
    items = d.get(children)
    if items is not None:
        out = getattr(msg, children_field)
        _read_each(_list(items, children), children, out, read_child)


# --- helpers -------------------------------------------------------------------------


def _surrogate() -> OtlpJsonError:
    """protobuf refuses strings that are not valid Unicode (it raises UnicodeEncodeError
    on assignment); JSON can spell one as an unpaired `\\ud800` escape. The loops catch
    that at the innermost level that knows the path, so the valid path costs nothing."""
    return OtlpJsonError("string contains an unpaired surrogate escape (not valid Unicode)")


def _kind(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, (int, float)):
        return "a number"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, list):
        return "an array"
    return "an object"


# snake_case → camelCase of the keys met outside the fast path. The keys come from the
# sender: a memo of every one grew without bound (issue 33: 80 requests with unique
# 400 KB keys, +617 MB never released). Only keys of at most `CAMEL_KEY_CHARS` are
# remembered (every OTLP field name is far shorter), in a cache bounded in entries and
# bytes (the oldest go first, counted as `otlp_json_keys` evictions); longer keys are
# converted each time.
CAMEL_KEY_CHARS = 64
CAMEL_ENTRIES = 1024
CAMEL_BYTES = 256 * 1024
_CAMEL: BoundedCache[str, str] = BoundedCache(
    "otlp_json_keys", max_entries=CAMEL_ENTRIES, max_bytes=CAMEL_BYTES, lru=False
)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _normalized(obj: dict[str, Any], known: frozenset[str]) -> dict[str, Any]:
    """Fast path: every key is a known lowerCamelCase name (a C-level subset test).
    Otherwise map snake_case keys to camelCase; unknown keys stay and are ignored."""
    if obj.keys() <= known:
        return obj
    out: dict[str, Any] = {}
    for k, v in obj.items():
        c = _CAMEL.get(k)
        if c is None:
            c = _camel(k) if "_" in k else k
            if len(k) <= CAMEL_KEY_CHARS:
                _CAMEL.put(k, c)
        out.setdefault(c, v)
    return out


def _obj(v: Any, field: str) -> dict[str, Any]:
    if type(v) is not dict:
        raise OtlpJsonError(f"expected an object, got {_kind(v)}", field)
    return v


def _list(v: Any, field: str) -> list[Any]:
    if type(v) is not list:
        raise OtlpJsonError(f"expected an array, got {_kind(v)}", field)
    return v


def _str(v: Any, field: str) -> str:
    if type(v) is not str:
        raise OtlpJsonError(f"expected a string, got {_kind(v)}", field)
    return v


def _integer(v: Any, field: str, lo: int, hi: int) -> int:
    if type(v) is int:
        n = v
    elif type(v) is str:
        s = v.strip()
        # isascii(): str.isdigit() also accepts "²" and other digits int() refuses.
        if not s or not s.isascii() or not (s.isdigit() or (s[0] == "-" and s[1:].isdigit())):
            raise OtlpJsonError(f"expected an integer, got string {v[:40]!r}", field)
        if len(s) > _MAX_INT_CHARS:  # also keeps int() clear of its 4,300-digit limit
            raise OtlpJsonError(f"integer of {len(s)} characters out of range [{lo}, {hi}]", field)
        n = int(s)
    elif type(v) is float and v.is_integer():
        n = int(v)
    else:
        raise OtlpJsonError(f"expected an integer, got {_kind(v)} {v!r}", field)
    if not lo <= n <= hi:
        raise OtlpJsonError(f"integer {n} out of range [{lo}, {hi}]", field)
    return n


def _u64(v: Any, field: str) -> int:
    return _integer(v, field, 0, _UINT64_MAX)


def _u32(v: Any, field: str) -> int:
    return _integer(v, field, 0, _UINT32_MAX)


def _i32(v: Any, field: str) -> int:
    return _integer(v, field, -(2**31), 2**31 - 1)


def _double(v: Any, field: str) -> float:
    if type(v) is float:
        return v
    if type(v) is int:
        try:
            return float(v)
        except OverflowError:  # an integer literal beyond the double range
            raise OtlpJsonError(
                f"number out of the double range: {str(v)[:40]}...", field
            ) from None
    if type(v) is str:
        special = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}.get(v)
        if special is not None:
            return special
        try:
            return float(v)
        except ValueError:
            pass
    raise OtlpJsonError(f"expected a number, got {_kind(v)} {v!r}", field)


_BASE64_HINT = (
    "; it looks like base64 (protobuf's generic JSON writer, e.g. MessageToJson): "
    "OTLP/JSON ids are hex — record with tracepass's configure(record_to=...), "
    "`tracepass serve --record`, or the OTel Collector file exporter"
)


def _looks_base64(v: str, size: int) -> bool:
    """A base64 id of `size` bytes: what protobuf's generic JSON mapping writes."""
    if len(v) != 4 * ((size + 2) // 3):
        return False
    try:
        return len(base64.b64decode(v, validate=True)) == size
    except (binascii.Error, ValueError):
        return False


def _hex_id(v: Any, field: str, size: int) -> bytes:
    if type(v) is not str:
        raise OtlpJsonError(f"expected a hex string, got {_kind(v)}", field)
    if not v:
        return b""
    try:
        if len(v) == 2 * size:
            return bytes.fromhex(v)
    except ValueError:
        pass
    hint = _BASE64_HINT if _looks_base64(v, size) else ""
    if len(v) != 2 * size:
        raise OtlpJsonError(
            f"expected {2 * size} hex characters ({size} bytes), got {len(v)} characters "
            f"{v!r}{hint}",
            field,
        )
    raise OtlpJsonError(f"not a hex string: {v!r}{hint}", field)


def _b64(v: Any, field: str) -> bytes:
    s = _str(v, field)
    try:
        if "-" in s or "_" in s:
            return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))
        return base64.b64decode(s + "=" * (-len(s) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise OtlpJsonError(f"not valid base64: {s[:40]!r}", field) from None


def _enum(v: Any, field: str, by_name: Callable[[str], int]) -> int:
    if type(v) is str and v and not v.lstrip("-").isdigit():
        try:
            return by_name(v)
        except ValueError:
            raise OtlpJsonError(f"unknown enum value {v!r}", field) from None
    return _i32(v, field)


# --- messages ------------------------------------------------------------------------

_ANY_KEYS = frozenset(
    {
        "stringValue",
        "boolValue",
        "intValue",
        "doubleValue",
        "arrayValue",
        "kvlistValue",
        "bytesValue",
        "stringValueStrindex",
    }
)


def _any_value(d: Any, av: AnyValue, depth: int = 0) -> None:
    if type(d) is not dict:
        raise OtlpJsonError(f"expected an AnyValue object, got {_kind(d)}")
    # Hot path: by far most attribute values are plain strings.
    s = d.get("stringValue")
    if s is not None and len(d) == 1:
        if type(s) is not str:
            raise OtlpJsonError(f"expected a string, got {_kind(s)}", "stringValue")
        av.string_value = s
        return
    d = _normalized(d, _ANY_KEYS)
    if s is not None:
        av.string_value = _str(s, "stringValue")
    elif (b := d.get("boolValue")) is not None:
        if type(b) is not bool:
            raise OtlpJsonError(f"expected a boolean, got {_kind(b)}", "boolValue")
        av.bool_value = b
    elif (n := d.get("intValue")) is not None:
        av.int_value = _integer(n, "intValue", _INT64_MIN, _INT64_MAX)
    elif (f := d.get("doubleValue")) is not None:
        av.double_value = _double(f, "doubleValue")
    elif (arr := d.get("arrayValue")) is not None:
        depth = _deeper(depth, _ARRAY_COST)
        values = _normalized(_obj(arr, "arrayValue"), _VALUES_KEYS).get("values") or []
        out = av.array_value.values
        av.array_value.SetInParent()
        for i, item in enumerate(_list(values, "arrayValue.values")):
            try:
                _any_value(item, out.add(), depth)
            except OtlpJsonError as exc:
                raise exc.prepend(f"[{i}]").prepend("arrayValue.values") from None
    elif (kvl := d.get("kvlistValue")) is not None:
        depth = _deeper(depth, _KVLIST_COST)
        values = _normalized(_obj(kvl, "kvlistValue"), _VALUES_KEYS).get("values") or []
        av.kvlist_value.SetInParent()
        _attributes(values, av.kvlist_value.values, "kvlistValue.values", depth)
    elif (raw := d.get("bytesValue")) is not None:
        av.bytes_value = _b64(raw, "bytesValue")
    elif (si := d.get("stringValueStrindex")) is not None:
        av.string_value_strindex = _i32(si, "stringValueStrindex")


def _deeper(depth: int, cost: int) -> int:
    depth += cost
    if depth > MAX_VALUE_DEPTH:
        raise OtlpJsonError(
            "attribute value nested too deeply: at most 31 kvlistValue or 46 arrayValue "
            "levels (deeper messages cannot be decoded again from storage)"
        )
    return depth


_VALUES_KEYS = frozenset({"values"})
_KV_KEYS = frozenset({"key", "value", "keyStrindex"})


def _attributes(items: Any, out: Any, field: str, depth: int = 0) -> None:
    if type(items) is not list:
        raise OtlpJsonError(f"expected an array, got {_kind(items)}", field)
    for i, kv in enumerate(items):
        try:
            if type(kv) is not dict:
                raise OtlpJsonError(f"expected a KeyValue object, got {_kind(kv)}")
            if not kv.keys() <= _KV_KEYS:
                kv = _normalized(kv, _KV_KEYS)
            key = kv.get("key")
            value = kv.get("value")
            if type(key) is str and type(value) is dict and len(value) == 1:
                # Hot path: a string-valued attribute (add()+setattr beats kwargs constructors).
                s = value.get("stringValue")
                if type(s) is str:
                    fast: KeyValue = out.add()
                    fast.key = key
                    fast.value.string_value = s
                    continue
            msg: KeyValue = out.add()
            if key is not None:
                if type(key) is not str:
                    raise OtlpJsonError(f"expected a string, got {_kind(key)}", "key")
                msg.key = key
            if value is not None:
                try:
                    _any_value(value, msg.value, depth)
                except OtlpJsonError as exc:
                    raise exc.prepend("value") from None
            if (ks := kv.get("keyStrindex")) is not None:
                msg.key_strindex = _i32(ks, "keyStrindex")
        except OtlpJsonError as exc:
            raise exc.prepend(f"[{i}]").prepend(field) from None
        except UnicodeEncodeError:
            raise _surrogate().prepend(f"[{i}]").prepend(field) from None


_RESOURCE_KEYS = frozenset({"attributes", "droppedAttributesCount"})
_SCOPE_KEYS = frozenset({"name", "version", "attributes", "droppedAttributesCount"})


def _resource(d: dict[str, Any], msg: Resource) -> None:
    d = _normalized(d, _RESOURCE_KEYS)
    msg.SetInParent()
    if (attrs := d.get("attributes")) is not None:
        try:
            _attributes(attrs, msg.attributes, "attributes")
        except OtlpJsonError as exc:
            raise exc.prepend("resource") from None
    if (n := d.get("droppedAttributesCount")) is not None:
        msg.dropped_attributes_count = _u32(n, "resource.droppedAttributesCount")


def _scope(d: dict[str, Any], msg: InstrumentationScope) -> None:
    d = _normalized(d, _SCOPE_KEYS)
    msg.SetInParent()
    if (name := d.get("name")) is not None:
        msg.name = _str(name, "scope.name")
    if (version := d.get("version")) is not None:
        msg.version = _str(version, "scope.version")
    if (attrs := d.get("attributes")) is not None:
        try:
            _attributes(attrs, msg.attributes, "attributes")
        except OtlpJsonError as exc:
            raise exc.prepend("scope") from None
    if (n := d.get("droppedAttributesCount")) is not None:
        msg.dropped_attributes_count = _u32(n, "scope.droppedAttributesCount")


_SPAN_KEYS = frozenset(
    {
        "traceId",
        "spanId",
        "traceState",
        "parentSpanId",
        "flags",
        "name",
        "kind",
        "startTimeUnixNano",
        "endTimeUnixNano",
        "attributes",
        "droppedAttributesCount",
        "events",
        "droppedEventsCount",
        "links",
        "droppedLinksCount",
        "status",
    }
)
_EVENT_KEYS = frozenset({"timeUnixNano", "name", "attributes", "droppedAttributesCount"})
_LINK_KEYS = frozenset(
    {"traceId", "spanId", "traceState", "attributes", "droppedAttributesCount", "flags"}
)
_STATUS_KEYS = frozenset({"code", "message"})


def _span(sp: Any, msg: Span) -> None:
    if type(sp) is not dict:
        raise OtlpJsonError(f"expected a Span object, got {_kind(sp)}")
    if not sp.keys() <= _SPAN_KEYS:
        sp = _normalized(sp, _SPAN_KEYS)
    g = sp.get
    if (v := g("traceId")) is not None:
        msg.trace_id = _hex_id(v, "traceId", 16)
    if (v := g("spanId")) is not None:
        msg.span_id = _hex_id(v, "spanId", 8)
    if (v := g("parentSpanId")) is not None:
        msg.parent_span_id = _hex_id(v, "parentSpanId", 8)
    if (v := g("traceState")) is not None:
        msg.trace_state = _str(v, "traceState")
    if (v := g("flags")) is not None:
        msg.flags = _u32(v, "flags")
    if (v := g("name")) is not None:
        msg.name = _str(v, "name")
    if (v := g("kind")) is not None:
        msg.kind = _enum(v, "kind", Span.SpanKind.Value)  # type: ignore[assignment]
    if (v := g("startTimeUnixNano")) is not None:
        msg.start_time_unix_nano = (
            v if type(v) is int and 0 <= v <= _UINT64_MAX else _u64(v, "startTimeUnixNano")
        )
    if (v := g("endTimeUnixNano")) is not None:
        msg.end_time_unix_nano = (
            v if type(v) is int and 0 <= v <= _UINT64_MAX else _u64(v, "endTimeUnixNano")
        )
    if (v := g("attributes")) is not None:
        _attributes(v, msg.attributes, "attributes")
    if (v := g("droppedAttributesCount")) is not None:
        msg.dropped_attributes_count = _u32(v, "droppedAttributesCount")
    if (v := g("events")) is not None:
        _read_each(_list(v, "events"), "events", msg.events, _event)
    if (v := g("droppedEventsCount")) is not None:
        msg.dropped_events_count = _u32(v, "droppedEventsCount")
    if (v := g("links")) is not None:
        _read_each(_list(v, "links"), "links", msg.links, _link)
    if (v := g("droppedLinksCount")) is not None:
        msg.dropped_links_count = _u32(v, "droppedLinksCount")
    if (v := g("status")) is not None:
        _status(_obj(v, "status"), msg.status)


def _event(ev: Any, msg: Span.Event) -> None:
    ev = _normalized(_obj(ev, ""), _EVENT_KEYS)
    if (v := ev.get("timeUnixNano")) is not None:
        msg.time_unix_nano = _u64(v, "timeUnixNano")
    if (v := ev.get("name")) is not None:
        msg.name = _str(v, "name")
    if (v := ev.get("attributes")) is not None:
        _attributes(v, msg.attributes, "attributes")
    if (v := ev.get("droppedAttributesCount")) is not None:
        msg.dropped_attributes_count = _u32(v, "droppedAttributesCount")


def _link(ln: Any, msg: Span.Link) -> None:
    ln = _normalized(_obj(ln, ""), _LINK_KEYS)
    if (v := ln.get("traceId")) is not None:
        msg.trace_id = _hex_id(v, "traceId", 16)
    if (v := ln.get("spanId")) is not None:
        msg.span_id = _hex_id(v, "spanId", 8)
    if (v := ln.get("traceState")) is not None:
        msg.trace_state = _str(v, "traceState")
    if (v := ln.get("attributes")) is not None:
        _attributes(v, msg.attributes, "attributes")
    if (v := ln.get("droppedAttributesCount")) is not None:
        msg.dropped_attributes_count = _u32(v, "droppedAttributesCount")
    if (v := ln.get("flags")) is not None:
        msg.flags = _u32(v, "flags")


def _status(st: dict[str, Any], msg: Status) -> None:
    st = _normalized(st, _STATUS_KEYS)
    msg.SetInParent()
    if (v := st.get("message")) is not None:
        msg.message = _str(v, "status.message")
    if (v := st.get("code")) is not None:
        msg.code = _enum(v, "status.code", Status.StatusCode.Value)  # type: ignore[assignment]


TRACES = JsonSignal("traces", "resourceSpans", "scopeSpans", "spans", _span)
