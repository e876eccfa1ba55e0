"""Pydantic Logfire's integrations (`logfire.instrument_openai_agents()`,
`logfire.instrument_openai()` / `instrument_anthropic()`): spans named by a message
template (`logfire.msg_template`), with Logfire's own attribute names.

| template | record | fields |
|---|---|---|
| `OpenAI Agents trace: {name}` | TURN | conversation id: `group_id` (`RunConfig.group_id`); query / answer: the turn's model calls |
| `Agent run: {name!r}` | TURN (nested: an agent step) | agent: `name` |
| `Function: {name}` | TOOL | name: `name`; arguments: `input`; result: `output`; error: `error` (`{"message", "data": {"error"}}`) |
| `Handoff: {from_agent} → {to_agent}` | OTHER, hand-off role | agent handed to: `to_agent` (none: the next agent span, see assembly/steps.py) |
| model calls (`Responses API`, `Chat Completion with …`, `Message with …`) | declined | the GenAI convention claims them (`gen_ai.operation.name`); their content (`raw_input`, `events`, `response`, `request_data`, `response_data`) is read by shape (`shape.py`) |

Scrubbing (on by default) replaces values with `[Scrubbed due to '…']` and lists what
it hid in `logfire.scrubbed`: those paths are kept on the record as `SCRUBBED_ATTR`
(reported, never guessed), and scrubbed text is never taken as a query, answer,
argument or result.
"""

from __future__ import annotations

from typing import Any, Final

from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tracepass.collector.normalize.extract import as_str
from tracepass.collector.normalize.registry import ROLE_ATTR, ROLE_HANDOFF, Convention
from tracepass.collector.records import (
    RecordKind,
    SpanRecord,
    coerce_result,
    deferred_arguments,
    loads,
    store_tool_arguments,
)

NAME: Final = "logfire"
TEMPLATE: Final = "logfire.msg_template"
SCRUBBED: Final = "logfire.scrubbed"
SCRUBBED_ATTR: Final = "tracepass.scrubbed"
SCRUBBED_PREFIX: Final = "[Scrubbed due to "
MAX_SCRUBBED: Final = 16


def is_scrubbed(value: Any) -> bool:
    """Whether a value is Logfire's scrubbing placeholder."""
    return isinstance(value, str) and value.startswith(SCRUBBED_PREFIX)


def _scrubbed_paths(raw: Any) -> tuple[str, ...]:
    decoded = loads(raw)
    if not isinstance(decoded, list):
        return ()
    paths: list[str] = []
    for entry in decoded[:MAX_SCRUBBED]:
        path = entry.get("path") if isinstance(entry, dict) else None
        if isinstance(path, list):
            paths.append(".".join(str(p) for p in path[:16]))
    return tuple(paths)


def _clean(value: Any) -> Any:
    return None if is_scrubbed(value) else value


def _error(raw: Any) -> str | None:
    decoded = loads(raw)
    if isinstance(decoded, dict):
        data = decoded.get("data")
        if isinstance(data, dict) and isinstance(data.get("error"), str) and data["error"]:
            return str(data["error"])
        return as_str(decoded.get("message")) or "error"
    return as_str(raw)


def _fill(rec: SpanRecord, attrs: dict[str, Any], template: Any, span: Span) -> str | None:
    get = attrs.get
    if SCRUBBED in attrs:
        paths = _scrubbed_paths(get(SCRUBBED))
        if paths:
            rec.attributes[SCRUBBED_ATTR] = paths
        if is_scrubbed(rec.conversation_id):  # a scrubbed `session.id`: no id, not this text
            rec.conversation_id = None
    if template.__class__ is not str:
        return None
    if template.startswith("OpenAI Agents trace"):
        rec.kind = RecordKind.TURN
        if rec.conversation_id is None:
            rec.conversation_id = as_str(_clean(get("group_id")))
    elif template.startswith("Agent run"):
        rec.kind = RecordKind.TURN
        rec.agent_name = as_str(_clean(get("name"))) or rec.agent_name
    elif template.startswith("Function:"):
        rec.kind = RecordKind.TOOL
        rec.tool_name = as_str(get("name")) or rec.name
        store_tool_arguments(rec, deferred_arguments(_clean(get("input"))))
        output = _clean(get("output"))
        rec.tool_result = coerce_result(output) if output is not None else None
        if "error" in attrs and rec.error is None:
            rec.error = _error(get("error"))
    elif template.startswith("Handoff:"):
        rec.attributes[ROLE_ATTR] = ROLE_HANDOFF
        rec.agent_name = as_str(_clean(get("to_agent")))
    else:
        return None  # model calls and the rest: the GenAI convention and shape read them
    return NAME


CONVENTIONS = (
    Convention(
        NAME,
        keys=(TEMPLATE,),
        fill=_fill,
        doc="Pydantic Logfire's integrations (`logfire.msg_template`): agents trace → "
        "TURN, agent run → nested TURN, function → TOOL, hand-off → hand-off role",
    ),
)
