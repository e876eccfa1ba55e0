"""User-written mappings (`conventions.custom` in the config), evaluated before the
built-in conventions.

Why: in-house instrumentation, or a framework tracepass has no convention or adapter
for, should not need a code change to be read. A mapping says which spans it claims
(instrumentation scope glob, span name glob or RE2 regex, attributes that must be
present) and where each field is (an attribute, JSON inside an attribute, an attribute
of a span event); `normalize_request` asks these mappings first and the built-in table
only for spans no mapping claimed.

Cost and bounds (a hostile or careless mapping must never stall ingest): which mappings
can apply is decided once per scope name and then once per span name (bounded caches,
cleared when full), so a mapping that matches nothing costs a dict lookup per span and
nothing at all when its scope glob excludes the scope; patterns are RE2 (linear time,
memory-capped, validated at load in `config.py`); JSON inside an attribute is parsed
only up to `conventions.max_json_chars` characters and walked along at most
`MAX_POINTER_SEGMENTS` segments; a mapping matching every span reads only the paths it
names.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from opentelemetry.proto.trace.v1.trace_pb2 import Span
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as _ga

from tracepass.collector.config import (
    ConventionsConfig,
    CustomMappingConfig,
    compile_safe_regex,
    glob_to_regex,
    parse_field_path,
)
from tracepass.collector.normalize.anyvalue import attributes_to_dict
from tracepass.collector.normalize.extract import as_str
from tracepass.collector.normalize.stats import ReadTally
from tracepass.collector.records import (
    NOT_JSON,
    RecordKind,
    SpanRecord,
    coerce_arguments,
    coerce_result,
    loads,
)
from tracepass.instrumentation import semconv as sc

# The convention label of a span a mapping claimed: `custom:<mapping name>`.
CUSTOM_PREFIX: Final = "custom:"
_CACHE_MAX = 4096
_MISSING: Any = object()
_KINDS = {
    "turn": RecordKind.TURN,
    "tool": RecordKind.TOOL,
    "model": RecordKind.MODEL,
    "other": RecordKind.OTHER,
}
INPUT_TOKENS: Final = _ga.GEN_AI_USAGE_INPUT_TOKENS
OUTPUT_TOKENS: Final = _ga.GEN_AI_USAGE_OUTPUT_TOKENS

Matcher = Callable[[str], bool]


@dataclass(frozen=True, slots=True)
class FieldPath:
    """Where one value is: `event` (None: the span's own attributes), the attribute
    `key`, then JSON pointer `segments` into it."""

    event: str | None
    key: str
    segments: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class CompiledMapping:
    name: str  # the convention label, `custom:<name>`
    kind: RecordKind
    scope: Matcher | None
    span_name: Matcher | None
    required: tuple[str, ...]
    fields: tuple[tuple[str, tuple[FieldPath, ...]], ...]


def _matcher(pattern: str) -> Matcher:
    compiled: Any = compile_safe_regex(pattern)
    search = compiled.search
    return lambda text: search(text) is not None


def compile_mapping(config: CustomMappingConfig) -> CompiledMapping:
    match = config.match
    name_matcher: Matcher | None = None
    if match.span_name_regex is not None:
        name_matcher = _matcher(match.span_name_regex)
    if match.span_name is not None:
        glob = _matcher(glob_to_regex(match.span_name))
        regex = name_matcher
        name_matcher = glob if regex is None else (lambda n: glob(n) and regex(n))
    fields = []
    for field_name, paths in config.fields.paths().items():
        fields.append((field_name, tuple(FieldPath(*parse_field_path(p)) for p in paths)))
    return CompiledMapping(
        name=CUSTOM_PREFIX + config.name,
        kind=_KINDS[config.kind],
        scope=_matcher(glob_to_regex(match.scope)) if match.scope is not None else None,
        span_name=name_matcher,
        required=tuple(match.attributes),
        fields=tuple(fields),
    )


class CustomConventions:
    """The compiled `conventions.custom` mappings; `for_scope` once per `ScopeSpans`."""

    def __init__(self, config: ConventionsConfig) -> None:
        self.mappings = tuple(compile_mapping(m) for m in config.custom)
        self.max_json_chars = config.max_json_chars
        self._scopes: dict[str, ScopeMappings | None] = {}

    def for_scope(self, scope_name: str) -> ScopeMappings | None:
        """The mappings that can claim spans of this scope (None: none can)."""
        found = self._scopes.get(scope_name, _MISSING)
        if found is _MISSING:
            candidates = tuple(m for m in self.mappings if m.scope is None or m.scope(scope_name))
            found = ScopeMappings(candidates, self.max_json_chars) if candidates else None
            if len(self._scopes) >= _CACHE_MAX:  # hostile scope names: stay bounded
                self._scopes.clear()
            self._scopes[scope_name] = found
        return found  # type: ignore[no-any-return]


class ScopeMappings:
    """The mappings of one scope, with the per-span-name decision cached."""

    __slots__ = ("by_name", "mappings", "max_json_chars")

    def __init__(self, mappings: tuple[CompiledMapping, ...], max_json_chars: int) -> None:
        self.mappings = mappings
        self.max_json_chars = max_json_chars
        # {span name: the mappings whose span-name pattern matches it}: the ingest loop
        # looks a name up here itself (a dict lookup per span, no call) and calls
        # `candidates` only for a name not seen yet, `claim` only when some can match.
        self.by_name: dict[str, tuple[CompiledMapping, ...]] = {}

    def candidates(self, name: str) -> tuple[CompiledMapping, ...]:
        """The mappings whose span-name pattern matches `name` (cached, bounded)."""
        found = tuple(m for m in self.mappings if m.span_name is None or m.span_name(name))
        if len(self.by_name) >= _CACHE_MAX:  # hostile span names: stay bounded
            self.by_name.clear()
        self.by_name[name] = found
        return found

    def claim(
        self,
        candidates: tuple[CompiledMapping, ...],
        rec: SpanRecord,
        attrs: dict[str, Any],
        span: Span,
        tally: ReadTally | None,
    ) -> str | None:
        """Fill `rec` from the first of `candidates` (`candidates(rec.name)`) whose
        required attributes are present; its label, or None."""
        for mapping in candidates:
            if all(key in attrs for key in mapping.required):
                self._fill(mapping, rec, attrs, span, tally)
                return mapping.name
        return None

    def _fill(
        self,
        mapping: CompiledMapping,
        rec: SpanRecord,
        attrs: dict[str, Any],
        span: Span,
        tally: ReadTally | None,
    ) -> None:
        rec.kind = mapping.kind
        events: dict[str, dict[str, Any]] | None = None
        for field_name, paths in mapping.fields:
            value: Any = None
            for path in paths:
                source = attrs
                if path.event is not None:
                    if events is None:
                        events = _events(span)
                    source = events.get(path.event, {})
                value = self._read(source, path)
                if value is not None:
                    break
            if value is None:
                if tally is not None:
                    tally.count_unreadable(field_name)
                continue
            _SETTERS[field_name](rec, value)

    def _read(self, source: dict[str, Any], path: FieldPath) -> Any:
        value = source.get(path.key)
        for segment in path.segments:
            if value.__class__ is str:
                if len(value) > self.max_json_chars:
                    return None
                value = loads(value)
                if value is NOT_JSON:
                    return None
            if isinstance(value, dict):
                value = value.get(segment)
            elif isinstance(value, list):
                try:
                    value = value[int(segment)]
                except (ValueError, IndexError):
                    return None
            else:
                return None
        return value


def _events(span: Span) -> dict[str, dict[str, Any]]:
    """{event name: its attributes} for the span's events (the first of each name)."""
    out: dict[str, dict[str, Any]] = {}
    for event in span.events:
        if event.name not in out:
            out[event.name] = attributes_to_dict(event.attributes)
    return out


def _text(value: Any) -> str | None:
    """A value as text: strings and numbers as is, structures as compact JSON."""
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return as_str(value)


def _tokens(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def _set_attribute(key: str, convert: Callable[[Any], Any]) -> Callable[[SpanRecord, Any], None]:
    def setter(rec: SpanRecord, value: Any) -> None:
        converted = convert(value)
        if converted is not None:
            rec.attributes[key] = converted

    return setter


def _set_field(name: str, convert: Callable[[Any], Any]) -> Callable[[SpanRecord, Any], None]:
    def setter(rec: SpanRecord, value: Any) -> None:
        converted = convert(value)
        if converted is not None:
            setattr(rec, name, converted)

    return setter


# Mapping field (config.MAPPING_FIELDS) → how it lands on the record.
_SETTERS: dict[str, Callable[[SpanRecord, Any], None]] = {
    "conversation_id": _set_field("conversation_id", _text),
    "query": _set_field("input_text", _text),
    "answer": _set_field("output_text", _text),
    "tool_name": _set_field("tool_name", _text),
    "call_id": _set_field("tool_call_id", _text),
    "arguments": _set_field("tool_arguments", coerce_arguments),
    "result": _set_field("tool_result", coerce_result),
    "error": _set_field("error", _text),
    "agent_name": _set_field("agent_name", _text),
    "model": _set_attribute(sc.REQUEST_MODEL, _text),
    "input_tokens": _set_attribute(INPUT_TOKENS, _tokens),
    "output_tokens": _set_attribute(OUTPUT_TOKENS, _tokens),
}
