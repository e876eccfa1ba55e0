"""The span shapes `tracepass inspect` saw: names, scopes and attribute keys.

Why: when tracepass reads nothing (or too little) from a file, the user needs to know
what the spans do carry to write a `conventions.custom` mapping, and
`inspect --suggest-mapping` needs the same facts to write a first one. Collected from
the raw requests in one pass, bounded (`MAX_DISTINCT` entries per table, one sample
value per attribute key of each shape, cut at `MAX_SAMPLE_CHARS`) so a hostile file
cannot grow it without limit.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracepass.collector.normalize import any_value

MAX_DISTINCT = 2_000
MAX_SAMPLE_CHARS = 4_000
# How many of each table a report lists (most frequent first).
TOP = 15


@dataclass(slots=True)
class Shape:
    """Spans of one (scope, span name): how many, their attribute keys (with how often)
    and one sample value per key, how many were roots or failed, their event names."""

    scope: str
    name: str
    count: int = 0
    roots: int = 0
    errors: int = 0
    keys: Counter[str] = field(default_factory=Counter)
    samples: dict[str, Any] = field(default_factory=dict)
    events: Counter[str] = field(default_factory=Counter)


@dataclass(slots=True)
class SpanShapes:
    span_names: Counter[str] = field(default_factory=Counter)
    scopes: Counter[str] = field(default_factory=Counter)
    attribute_keys: Counter[str] = field(default_factory=Counter)
    shapes: dict[tuple[str, str], Shape] = field(default_factory=dict)
    spans: int = 0

    def add(self, request: ExportTraceServiceRequest) -> None:
        for resource_spans in request.resource_spans:
            for scope_spans in resource_spans.scope_spans:
                scope = scope_spans.scope.name
                for span in scope_spans.spans:
                    self._add_span(scope, span)

    def _add_span(self, scope: str, span: Any) -> None:
        self.spans += 1
        _count(self.span_names, span.name)
        _count(self.scopes, scope)
        shape = self.shapes.get((scope, span.name))
        if shape is None:
            if len(self.shapes) >= MAX_DISTINCT:
                return
            shape = self.shapes[(scope, span.name)] = Shape(scope, span.name)
        shape.count += 1
        if not span.parent_span_id or not any(span.parent_span_id):
            shape.roots += 1
        if span.status.code == 2:  # STATUS_CODE_ERROR
            shape.errors += 1
        for kv in span.attributes:
            _count(self.attribute_keys, kv.key)
            _count(shape.keys, kv.key)
            if kv.key not in shape.samples and len(shape.samples) < MAX_DISTINCT:
                value = any_value(kv.value)
                if isinstance(value, str):
                    value = value[:MAX_SAMPLE_CHARS]
                shape.samples[kv.key] = value
        for event in span.events:
            _count(shape.events, event.name)

    def top(self) -> dict[str, dict[str, int]]:
        """The most frequent span names, scopes and attribute keys (for the report)."""
        return {
            "span_names": dict(self.span_names.most_common(TOP)),
            "scopes": dict(self.scopes.most_common(TOP)),
            "attribute_keys": dict(self.attribute_keys.most_common(TOP)),
        }


def _count(counter: Counter[str], key: str) -> None:
    if key in counter or len(counter) < MAX_DISTINCT:
        counter[key] += 1
