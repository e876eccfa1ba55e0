"""A starting `conventions.custom` mapping from the span shapes a file holds
(`tracepass inspect --suggest-mapping`).

Why: writing a mapping from scratch means reading raw spans; most in-house
instrumentation names its attributes plainly (`…tool.name`, `…args`, `…session_id`),
so guessing from key names and one sample value per key gets a user most of the way.
The guesses are deliberately simple and spelled out here; the output is YAML meant to be
read, corrected and pasted into the collector config (docs/conventions.md, "My framework
is not listed").

Per (scope, span name): a shape with a tool-name key is a tool; a shape whose spans are
all trace roots and that has a query or answer key is a turn; a child shape with a model
key and an answer or token key is a model call; other shapes are left to the built-in
conventions. JSON text holding chat messages is addressed at its last message's
content.
"""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

from tracepass.collector.records import NOT_JSON, loads

from .span_shapes import Shape, SpanShapes

_CONVERSATION = re.compile(r"(session|conversation|thread)[._]?id$|(session|conversation)$", re.I)
_AGENT = re.compile(r"agent[._]?name$|functionid$", re.I)
_MODEL = re.compile(r"model([._]?(id|name))?$", re.I)
_INPUT_TOKENS = re.compile(r"(input|prompt)[._]?tokens$", re.I)
_OUTPUT_TOKENS = re.compile(r"(output|completion)[._]?tokens$", re.I)
_TOOL_NAME = re.compile(r"(tool|function)[._]?(call[._]?)?name$", re.I)
_CALL_ID = re.compile(r"(tool|call|function)[._]?(call[._]?)?id$", re.I)
_ARGUMENTS = re.compile(r"(args|arguments|parameters|params|input)$", re.I)
_RESULT = re.compile(r"(result|output|response)$", re.I)
_QUERY = re.compile(r"(prompt|query|question|input|user[._]?message|input\.value)$", re.I)
_ANSWER = re.compile(r"(answer|completion|response[._]?text|output|output\.value)$", re.I)


def _first(shape: Shape, pattern: re.Pattern[str], exclude: set[str] | None = None) -> str | None:
    """The most frequent key of the shape that matches `pattern`."""
    for key, _ in shape.keys.most_common():
        if (exclude is None or key not in exclude) and pattern.search(key):
            return key
    return None


def _content_path(shape: Shape, key: str) -> str:
    """`key`, or a pointer to the last message's content when it holds chat messages."""
    value = loads(shape.samples.get(key))
    if value is NOT_JSON:
        return key
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        return f"{key}#/messages/-1/content"
    if isinstance(value, list) and value and isinstance(value[-1], dict) and "content" in value[-1]:
        return f"{key}#/-1/content"
    return key


def _common(shape: Shape, fields: dict[str, Any]) -> None:
    for name, pattern in (
        ("conversation_id", _CONVERSATION),
        ("agent_name", _AGENT),
        ("model", _MODEL),
        ("input_tokens", _INPUT_TOKENS),
        ("output_tokens", _OUTPUT_TOKENS),
    ):
        key = _first(shape, pattern)
        if key is not None:
            fields[name] = key


def _mapping_for(shape: Shape) -> dict[str, Any] | None:
    fields: dict[str, Any] = {}
    match: dict[str, Any] = {"scope": shape.scope, "span_name": shape.name}
    tool_name = _first(shape, _TOOL_NAME)
    if tool_name is not None:
        kind = "tool"
        used = {tool_name}
        fields["tool_name"] = tool_name
        match["attributes"] = [tool_name]
        for name, pattern in (
            ("call_id", _CALL_ID),
            ("arguments", _ARGUMENTS),
            ("result", _RESULT),
        ):
            key = _first(shape, pattern, used)
            if key is not None:
                fields[name] = key
                used.add(key)
        if shape.errors and "exception" in shape.events:
            fields["error"] = "event:exception/exception.message"
        _common(shape, fields)
        fields.pop("model", None)
    else:
        query = _first(shape, _QUERY)
        answer = _first(shape, _ANSWER, {query} if query else None)
        model = _first(shape, _MODEL)
        tokens = _first(shape, _INPUT_TOKENS) or _first(shape, _OUTPUT_TOKENS)
        if shape.roots == shape.count and (query or answer):
            kind = "turn"
        elif model and (answer or tokens):
            kind = "model"
        else:
            return None
        if query:
            fields["query"] = _content_path(shape, query)
        if answer:
            fields["answer"] = _content_path(shape, answer)
        _common(shape, fields)
    if not shape.scope:
        del match["scope"]
    return {
        "name": _slug(f"{shape.scope}-{shape.name}" if shape.scope else shape.name),
        "match": match,
        "kind": kind,
        "fields": fields,
    }


def _slug(text: str) -> str:
    return (re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "mapping")[:64]


def suggest_mapping(shapes: SpanShapes) -> str:
    """A config document (`conventions.custom`) for the shapes seen, most frequent
    first; a comment line when none looks like a turn, tool or model call."""
    mappings = []
    names: set[str] = set()
    for shape in sorted(shapes.shapes.values(), key=lambda s: (-s.count, s.scope, s.name)):
        mapping = _mapping_for(shape)
        if mapping is None:
            continue
        base, n = mapping["name"], 2
        while mapping["name"] in names:
            mapping["name"] = f"{base[:60]}-{n}"
            n += 1
        names.add(mapping["name"])
        mappings.append(mapping)
    header = (
        "# Suggested by `tracepass inspect --suggest-mapping` from "
        f"{shapes.spans} span(s): check each path, then paste into the collector config.\n"
        "# Paths: KEY, KEY#/json/pointer (JSON inside the attribute), "
        "event:EVENT_NAME/KEY (docs/conventions.md).\n"
    )
    if not mappings:
        return header + "# No span shape looks like a turn, a tool call or a model call.\n"
    document = {"conventions": {"custom": mappings}}
    text: str = yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=100)
    return header + text


def suggestion_as_json(shapes: SpanShapes) -> str:
    """The same suggestion as JSON (for `--format json`)."""
    parsed = yaml.safe_load(suggest_mapping(shapes)) or {}
    return json.dumps(parsed, indent=2, ensure_ascii=False)
