"""Seeded generation of hostile span-declared tool schemas (issue 21): each input is one
OTLP request holding one agent turn whose model span offers tools with generated
schemas (`gen_ai.tool.definitions`) and calls each of them with generated arguments.
The schemas mix what an attacker would send — `$ref`s that leave the document (to a
listener the test watches, to files, relative, unresolvable or cyclic), backtracking
patterns, `uniqueItems` over thousands of objects, nesting and sizes beyond the bounds,
exponential `$ref` graphs — with ordinary schemas, so checks still run between them."""

from __future__ import annotations

import json
import random
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from test_normalize_basics import make_request, make_span

__all__ = ["schema_requests"]

_PATTERNS = [
    "^(a+)+$",
    "(a|aa)+$",
    "^(a|a?)+$",
    "(x+x+)+y",
    "^([a-z0-9]+)*@",
    "(?=a)a",  # look-ahead: RE2 cannot run it
    "(a)\\1",  # back-reference
    "a{1000}{1000}",
    "[",  # invalid
    "^[A-Z]{3}$",
    "\\d+",
    "^\\p{L}+$",
]


def _ref(rng: random.Random, listener_port: int) -> str:
    return rng.choice(
        [
            f"http://127.0.0.1:{listener_port}/internal-admin?probe={rng.randrange(10**6)}",
            f"https://127.0.0.1:{listener_port}/x",
            f"//127.0.0.1:{listener_port}/x",
            "file:///dev/zero",
            "file:///etc/passwd",
            "other.json#/a",
            "urn:example:x",
            "#/$defs/missing",
            "#",
            "#/properties",
            "#/$defs/ok",
        ]
    )


def _nested(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"x": schema}}
    return schema


def _exponential(levels: int) -> dict[str, Any]:
    defs: dict[str, Any] = {"a0": {"type": "string"}}
    for i in range(1, levels + 1):
        defs[f"a{i}"] = {"anyOf": [{"$ref": f"#/$defs/a{i - 1}"}] * 2}
    return {"$defs": defs, "properties": {"x": {"$ref": f"#/$defs/a{levels}"}}}


def _schema(rng: random.Random, listener_port: int) -> tuple[Any, dict[str, Any]]:
    """(schema, arguments of the call)."""
    kind = rng.random()
    if kind < 0.2:
        ref = _ref(rng, listener_port)
        where = rng.choice(["root", "property", "id"])
        if where == "root":
            return {"$ref": ref, "$defs": {"ok": {}}}, {"a": 1}
        if where == "id":
            return {
                "$id": f"http://127.0.0.1:{listener_port}/base/",
                "properties": {"a": {"$ref": rng.choice(["#/nope", "x.json", ref])}},
            }, {"a": 1}
        key = rng.choice(["$ref", "$dynamicRef", "$recursiveRef"])
        return {"$defs": {"ok": {}}, "properties": {"a": {key: ref}}}, {"a": rng.choice([1, "x"])}
    if kind < 0.4:
        pattern = rng.choice(_PATTERNS)
        text = "a" * rng.randint(10, 40) + rng.choice(["!", "", "y", "@"])
        if rng.random() < 0.5:
            return {"properties": {"s": {"type": "string", "pattern": pattern}}}, {"s": text}
        return {
            "patternProperties": {pattern: {"type": "integer"}},
            "additionalProperties": rng.choice([False, {"type": "string"}]),
            **({"unevaluatedProperties": False} if rng.random() < 0.2 else {}),
        }, {text: rng.choice([1, "x"])}
    if kind < 0.55:
        n = rng.choice([10, 1000, 8000])
        items: list[Any] = [{"k": i, "v": [i, {"n": str(i)}]} for i in range(n)]
        if rng.random() < 0.5:
            items.append({"v": [0, {"n": "0"}], "k": 0.0})
        return {"properties": {"x": {"type": "array", "uniqueItems": True}}}, {"x": items}
    if kind < 0.65:
        depth = rng.choice([5, 31, 33, 200])
        return _nested(depth), {"x": {"x": "deep"}}
    if kind < 0.72:
        width = rng.choice([100, 3000, 20000])
        return {"properties": {f"p{i}": {"type": "string"} for i in range(width)}}, {"p1": 2}
    if kind < 0.76:
        return _exponential(rng.choice([10, 30])), {"x": 1}
    if kind < 0.82:
        return rng.choice([[], "schema", 1, None, {"type": 7}, {"$schema": "http://x/y"}]), {}
    # Ordinary schemas: the checks must still decide these.
    return {
        "type": "object",
        "required": ["city"],
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    }, rng.choice([{"city": "Oslo"}, {"city": 42}, {"days": "x"}])


def schema_requests(
    seed: int, count: int, listener_port: int
) -> list[tuple[ExportTraceServiceRequest, int]]:
    """`count` requests (each with its number of tool calls), the same for the same seed."""
    rng = random.Random(seed)
    out = []
    for n in range(count):
        trace = (n + 1).to_bytes(16, "big")
        tools = [_schema(rng, listener_port) for _ in range(rng.randint(1, 4))]
        definitions = [{"name": f"t{k}", "parameters": s} for k, (s, _) in enumerate(tools)]
        spans = [
            make_span(
                "invoke_agent fuzz",
                {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "fuzz"},
                span_id=1,
                trace_id=trace,
                start=1_000,
                end=9_000,
            ),
            make_span(
                "chat fake",
                {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.tool.definitions": json.dumps(definitions),
                },
                span_id=2,
                parent=1,
                trace_id=trace,
                start=1_100,
                end=1_200,
            ),
        ]
        for k, (_, arguments) in enumerate(tools):
            spans.append(
                make_span(
                    f"execute_tool t{k}",
                    {
                        "gen_ai.operation.name": "execute_tool",
                        "gen_ai.tool.name": f"t{k}",
                        "gen_ai.tool.call.arguments": json.dumps(arguments),
                    },
                    span_id=3 + k,
                    parent=1,
                    trace_id=trace,
                    start=2_000 + k * 100,
                    end=2_050 + k * 100,
                )
            )
        out.append((make_request(*spans), len(tools)))  # type: ignore[arg-type]
    return out
