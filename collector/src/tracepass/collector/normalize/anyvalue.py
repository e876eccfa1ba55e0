"""OTLP `AnyValue`/`KeyValue` → plain Python, written for the hot path.

Every span's attributes pass through here exactly once, so the function avoids
generic reflection (`MessageToDict`) and dispatches on the oneof name. Bytes become
base64 text (the OTLP/JSON spelling) so records stay JSON-serializable for the state
store; arrays become lists and kvlists dicts.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from typing import Any


def any_value(value: Any) -> Any:
    """Convert one `opentelemetry.proto.common.v1.AnyValue`; an empty value is None."""
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return value.string_value
    if kind is None:
        return None
    if kind == "int_value":
        return value.int_value
    if kind == "bool_value":
        return value.bool_value
    if kind == "double_value":
        return value.double_value
    if kind == "array_value":
        return [any_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in value.kvlist_value.values}
    if kind == "bytes_value":
        return base64.b64encode(value.bytes_value).decode("ascii")
    return None  # a oneof member added by a future OTLP version: ignore, don't fail


def attributes_to_dict(key_values: Iterable[Any]) -> dict[str, Any]:
    """Convert repeated `KeyValue`; on duplicate keys the last one wins (as in the SDK)."""
    out: dict[str, Any] = {}
    for kv in key_values:
        value = kv.value
        # Most GenAI attributes are non-empty strings: reading `string_value` first (it
        # is "" when another member of the oneof is set) skips the `WhichOneof` call.
        text = value.string_value
        if text:
            out[kv.key] = text
        else:
            out[kv.key] = any_value(value)
    return out
