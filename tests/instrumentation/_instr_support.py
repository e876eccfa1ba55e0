"""Span lookup helpers shared by the instrumentation tests."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan


def by_name(finished: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in finished if s.name == name]


def one(finished: Sequence[ReadableSpan], name: str) -> ReadableSpan:
    found = by_name(finished, name)
    assert len(found) == 1, f"expected one {name!r}, got {[s.name for s in finished]}"
    return found[0]


def attr_json(span: ReadableSpan, key: str) -> Any:
    assert span.attributes is not None
    value = span.attributes[key]
    assert isinstance(value, str)
    return json.loads(value)
