"""The shapes of the two tables `normalize_request` dispatches on: conventions and adapters.

Why tables: every instrumentation convention (tracepass, GenAI semconv, OpenInference,
OpenLLMetry) and every framework quirk on top of one (argument wrappers, synthetic tool
spans, answer-carrying tools, result wrappers) is one small module that declares *when*
it applies and *what* it fills. The dispatch loop only walks the tables, so supporting
another framework means adding a module, never editing the loop.

* A `Convention` claims a span by the presence of one of its attribute `keys` (first key
  present, in table order, wins; a dict lookup each, the hot path) or by its span name,
  and fills the `SpanRecord` that `normalize_request` built with the common fields and
  kind OTHER. Its `fill` may decline (return None) to let the next convention try.
* An `Adapter` applies to the spans of instrumentation scopes whose name starts with one
  of its `scopes` prefixes (decided once per scope, not per span) and corrects the
  record after the convention filled it; it returns True when it changed something, so
  `tracepass inspect` can say which adapter touched a span.

Where a field came from, when not from the claiming convention's own attributes, is
noted with `note_source` in the record's `attributes` (`tracepass.sources`), so the
record stays one object on the hot path and provenance survives the state store.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tracepass.collector.records import SpanRecord

# Keys of `SpanRecord.attributes` that describe how the record was read.
CONVENTION_ATTR: Final = "tracepass.convention"
ADAPTERS_ATTR: Final = "tracepass.adapters"
SOURCES_ATTR: Final = "tracepass.sources"
# An adapter's role for a span that is not what its kind suggests (see `ROLE_ANSWER`).
ROLE_ATTR: Final = "tracepass.role"
# A tool-like span whose argument is the turn's answer (smolagents `final_answer`): kept
# as OTHER with the answer in `output_text`; assembly prefers it over model output.
ROLE_ANSWER: Final = "answer"
# A hand-off to another agent (OpenAI Agents hand-off spans, agento11y `run_type=handoff`,
# `transfer_to_<agent>` tools): kept as OTHER with the agent handed to in `agent_name`;
# assembly makes it an agent step of the turn (assembly/steps.py), not a tool call.
ROLE_HANDOFF: Final = "handoff"
# [run id, parent run id] of a framework run, for SDKs that start every span as its own
# trace and link runs by id instead (agento11y): assembly re-links them (assembly/runs.py).
RUN_IDS_ATTR: Final = "tracepass.run_ids"

# MODEL records: {tool-call id: response} found in the model's input messages, for tool
# spans that record no result (joined by id in assembly).
TOOL_RESPONSES_ATTR: Final = "tracepass.tool_responses"
# {tool-call id: tool name} of those responses, when known: matches them to requested
# calls that carry no id (by name, in order).
TOOL_RESPONSE_NAMES_ATTR: Final = "tracepass.tool_response_names"

# Values of `tracepass.sources` entries (and of `ToolCall.arguments_source`).
SOURCE_ATTRIBUTE: Final = "attribute"
SOURCE_SPAN_EVENT: Final = "span_event"
SOURCE_LOG: Final = "log"
SOURCE_ADAPTER: Final = "adapter"
SOURCE_MODEL_REQUEST: Final = "model_request"

# fill(record, attributes, marker value, span) -> convention name, or None to decline.
Fill = Callable[[SpanRecord, dict[str, Any], Any, Span], str | None]
# adapt(record, attributes, span) -> whether the record changed.
Adapt = Callable[[SpanRecord, dict[str, Any], Span], bool]


@dataclass(frozen=True, slots=True)
class Convention:
    """An instrumentation convention: which spans it claims and how it reads them."""

    name: str
    keys: tuple[str, ...]
    fill: Fill
    span_names: frozenset[str] = field(default_factory=frozenset)
    doc: str = ""


@dataclass(frozen=True, slots=True)
class Adapter:
    """A framework's corrections on top of a convention, for the scopes it names."""

    name: str
    scopes: tuple[str, ...]
    adapt: Adapt
    doc: str = ""
    # What `tracepass inspect` tells when a turn this adapter read has no query or no
    # answer: the framework's setting that puts them on spans (empty: nothing to tell).
    missing_content_hint: str = ""

    def matches_scope(self, scope_name: str) -> bool:
        return scope_name.startswith(self.scopes)


def note_source(rec: SpanRecord, field_name: str, source: str) -> None:
    """Record that `field_name` of `rec` came from `source` (not the convention's own
    attributes, which is the default and not noted)."""
    sources = rec.attributes.get(SOURCES_ATTR)
    if sources is None:
        rec.attributes[SOURCES_ATTR] = {field_name: source}
    else:
        sources[field_name] = source


def source_of(rec: SpanRecord, field_name: str) -> str:
    """Where `field_name` of `rec` came from (`SOURCE_ATTRIBUTE` unless noted)."""
    sources = rec.attributes.get(SOURCES_ATTR)
    if isinstance(sources, dict):
        found = sources.get(field_name)
        if isinstance(found, str):
            return found
    return SOURCE_ATTRIBUTE
