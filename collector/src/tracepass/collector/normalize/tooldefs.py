"""The tools a model was offered, from each convention's span attributes
(docs/conventions.md, "Offered tools"):

* OTel GenAI semconv: `gen_ai.tool.definitions`, a JSON array of
  `{type, name, description, parameters}` (also written by current OpenLLMetry);
* OpenInference: `llm.tools.N.tool.json_schema`, one JSON object per tool in OpenAI's
  shape `{type: "function", function: {name, description, parameters}}` (some
  integrations write the whole list as one `llm.tools` JSON array);
* older OpenLLMetry: `llm.request.functions.N.name|description|parameters`;
* tracepass's `@tool`: `tracepass.tool.parameters_schema` on the tool span itself (the
  JSON Schema of the decorated function's parameters); Strands writes the same as
  `gen_ai.tool.json_schema`.

`gen_ai.tool.definitions` is read on agent (`invoke_agent`) spans too, where the GenAI
semconv also allows it: the tools the agent offers its model in that turn.

Definitions are read leniently (a provider's shape: `function` wrapper, `input_schema`,
schemas given as JSON text); an entry without a name is skipped. None means the span
did not say, which is different from "offered no tools" (an empty tuple).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from tracepass.collector.normalize.extract import as_str
from tracepass.collector.records import loads
from tracepass.evaluator.models import ToolDefinition
from tracepass.instrumentation import semconv as sc

__all__ = [
    "GENAI_DEFINITIONS",
    "TOOL_JSON_SCHEMA",
    "TRACEPASS_PARAMETERS_SCHEMA",
    "genai_definitions",
    "model_definitions",
    "openinference_definitions",
    "openllmetry_functions",
    "tracepass_tool_definition",
]

GENAI_DEFINITIONS = sc.TOOL_DEFINITIONS
OPENINFERENCE_TOOLS = "llm.tools."
OPENLLMETRY_FUNCTIONS = "llm.request.functions."
TRACEPASS_PARAMETERS_SCHEMA = sc.TOOL_PARAMETERS_SCHEMA
TOOL_JSON_SCHEMA = "gen_ai.tool.json_schema"  # Strands' spelling of the same, on tool spans
OPENINFERENCE_TOOL_LIST = "llm.tools"

_SCHEMA_KEYS = ("parameters", "input_schema", "inputSchema", "json_schema")
_MAX_TOOLS = 1024  # flattened attributes are numbered: stop at a sane bound


def _schema(value: Any) -> dict[str, Any] | None:
    decoded = loads(value) if isinstance(value, str) else value
    return dict(decoded) if isinstance(decoded, Mapping) else None


_CACHED_TEXT_MAX = 16 * 1024  # larger texts are decoded each time, not kept


def _definition(item: Any) -> ToolDefinition | None:
    if isinstance(item, str):
        if len(item) <= _CACHED_TEXT_MAX:
            return _definition_text(item)
        return _definition_object(loads(item))
    return _definition_object(item)


@functools.lru_cache(maxsize=512)
def _definition_text(item: str) -> ToolDefinition | None:
    """A definition from JSON text, cached: a run re-declares the same tools on every
    model span, and decoding the schema plus validating the model was most of the cost of
    reading a model span. Definitions are frozen values, shared between records."""
    return _definition_object(loads(item))


@functools.lru_cache(maxsize=256)
def _definitions_text(raw: str) -> tuple[ToolDefinition, ...] | None:
    """`gen_ai.tool.definitions` / `llm.tools` JSON text (a whole list), cached likewise."""
    return _definitions(raw)


def _definitions(raw: Any) -> tuple[ToolDefinition, ...] | None:
    """A whole list of definitions (or one definition) as JSON text or decoded."""
    decoded = loads(raw)
    if isinstance(decoded, Mapping):
        decoded = [decoded]
    if not isinstance(decoded, list | tuple):
        return None  # truncated or unreadable: the offer is unknown, not empty
    return _collect(decoded)


def _definition_object(obj: Any) -> ToolDefinition | None:
    if not isinstance(obj, Mapping):
        return None
    inner = obj.get("function")
    if isinstance(inner, Mapping):
        obj = inner
    name = as_str(obj.get("name"))
    if name is None:
        return None
    schema = None
    for key in _SCHEMA_KEYS:
        if obj.get(key) is not None:
            schema = _schema(obj[key])
            break
    # model_construct: the fields already have their types (validation only cost time).
    return ToolDefinition.model_construct(
        name=name, description=as_str(obj.get("description")), parameters=schema
    )


def _collect(items: Any) -> tuple[ToolDefinition, ...]:
    out = [d for d in map(_definition, items) if d is not None]
    return tuple(out)


def definitions_from_items(items: Any) -> tuple[ToolDefinition, ...]:
    """Definitions from a list of items, each a definition object or its JSON text (the
    Vercel AI SDK's `ai.prompt.tools` array attribute)."""
    return _collect(items)


def genai_definitions(attrs: dict[str, Any]) -> tuple[ToolDefinition, ...] | None:
    raw = attrs.get(GENAI_DEFINITIONS)
    if raw is None:
        return None
    if isinstance(raw, str) and len(raw) <= _CACHED_TEXT_MAX:
        return _definitions_text(raw)
    return _definitions(raw)


def openinference_definitions(attrs: dict[str, Any]) -> tuple[ToolDefinition, ...] | None:
    if OPENINFERENCE_TOOLS + "0.tool.json_schema" not in attrs:
        listed = attrs.get(OPENINFERENCE_TOOL_LIST)
        decoded = None if listed is None else loads(listed)
        return _collect(decoded) if isinstance(decoded, list | tuple) else None
    items = []
    for i in range(_MAX_TOOLS):
        raw = attrs.get(f"{OPENINFERENCE_TOOLS}{i}.tool.json_schema")
        if raw is None:
            break
        items.append(raw)
    return _collect(items)


def openllmetry_functions(attrs: dict[str, Any]) -> tuple[ToolDefinition, ...] | None:
    if OPENLLMETRY_FUNCTIONS + "0.name" not in attrs:
        return None
    items = []
    for i in range(_MAX_TOOLS):
        base = f"{OPENLLMETRY_FUNCTIONS}{i}."
        if base + "name" not in attrs:
            break
        items.append(
            {
                "name": attrs.get(base + "name"),
                "description": attrs.get(base + "description"),
                "parameters": attrs.get(base + "parameters"),
            }
        )
    return _collect(items)


def model_definitions(attrs: dict[str, Any]) -> tuple[ToolDefinition, ...] | None:
    """A model span's offered tools, whichever convention recorded them."""
    found = genai_definitions(attrs)
    if found is None:
        found = openllmetry_functions(attrs)
    if found is None:
        found = openinference_definitions(attrs)
    return found


def tracepass_tool_definition(
    name: str | None, attrs: dict[str, Any]
) -> tuple[ToolDefinition, ...] | None:
    """A tool span's own parameter schema (`@tool`, or Strands' `gen_ai.tool.json_schema`)."""
    raw = attrs.get(TRACEPASS_PARAMETERS_SCHEMA)
    if raw is None:
        raw = attrs.get(TOOL_JSON_SCHEMA)
    if raw is None or name is None:
        return None
    schema = _schema(raw)
    if schema is None:
        return None
    return (ToolDefinition(name=name, parameters=schema),)
