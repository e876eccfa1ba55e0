"""The `policies:` section of a reference file (docs/references.md, "Policies"):
plain data → `Policy`, with the field path kept so errors say where (the loader adds
file and line). Everything that could fail mid-evaluation is checked here instead:
rule fields per type, regexes, JSON Schemas (with `jsonschema`), grader options.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from tracepass.evaluator.judge.conversation_judges import ConversationJudgeError, compile_judge
from tracepass.evaluator.models import (
    RULE_TYPES,
    ConversationJudgeSpec,
    Policy,
    PolicyRule,
    PolicyTool,
)
from tracepass.evaluator.references._fields import (
    Path,
    _fail,
    _graders,
    _list,
    _mapping,
    _string,
    _type_name,
    _unknown,
)
from tracepass.evaluator.references.errors import ReferenceLoadError, flatten, raise_collected
from tracepass.evaluator.scoring.learned_checks import schema_problem

__all__ = ["parse_policies"]

_POLICY_KEYS = {"id", "agent", "version", "tools", "rules", "graders", "conversation_judges"}
_TOOL_KEYS = {"arguments_schema"}
# Required and optional fields of each rule type (besides `type`).
_RULE_FIELDS: dict[str, tuple[set[str], set[str]]] = {
    "order": ({"first", "then"}, set()),
    "forbidden_tool": ({"name"}, set()),
    "max_tool_calls": (set(), {"per_turn", "per_conversation"}),
    "requires_tool": ({"when_query_matches", "name"}, set()),
    "repeated_call": ({"limit"}, set()),
}
_INT_FIELDS = {"per_turn", "per_conversation", "limit"}


def _tools(v: Any, path: Path) -> tuple[PolicyTool, ...]:
    """`{name: {arguments_schema: …}}` or a list of names / `{name, arguments_schema}`."""
    out: list[PolicyTool] = []
    if isinstance(v, Mapping):
        items: list[tuple[Any, Any, Path]] = [(k, spec, (*path, str(k))) for k, spec in v.items()]
    else:
        items = []
        for k, item in enumerate(_list(v, path)):
            if isinstance(item, str):
                items.append((item, None, (*path, k)))
            else:
                m = dict(_mapping(item, (*path, k)))
                items.append((m.pop("name", None), m, (*path, k)))
    seen: set[str] = set()
    for name, spec, p in items:
        name = _string(name, p if isinstance(v, Mapping) else (*p, "name"))
        if name in seen:
            raise _fail(p, f"tool {name!r} declared twice")
        seen.add(name)
        schema = None
        if spec is not None:
            spec = _mapping(spec, p)
            _unknown(spec, _TOOL_KEYS, p)
            if spec.get("arguments_schema") is not None:
                schema = dict(_mapping(spec["arguments_schema"], (*p, "arguments_schema")))
                problem = schema_problem(schema)
                if problem is not None:
                    raise _fail((*p, "arguments_schema"), problem)
        out.append(PolicyTool(name=name, arguments_schema=schema))
    return tuple(out)


def _rule(v: Any, path: Path) -> PolicyRule:
    raw = _mapping(v, path)
    kind = raw.get("type")
    if kind not in _RULE_FIELDS:
        raise _fail((*path, "type"), f"expected one of {', '.join(RULE_TYPES)}, got {kind!r}")
    required, optional = _RULE_FIELDS[kind]
    _unknown(raw, {"type"} | required | optional, path)
    for key in sorted(required):
        if key not in raw:
            raise _fail(path, f"a {kind} rule needs {key!r}")
    if kind == "max_tool_calls" and not optional & set(raw):
        raise _fail(path, "a max_tool_calls rule needs 'per_turn' or 'per_conversation'")
    data: dict[str, Any] = {"type": kind}
    for key in (required | optional) & set(raw):
        value = raw[key]
        if key in _INT_FIELDS:
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise _fail((*path, key), f"expected a positive integer, got {value!r}")
        else:
            value = _string(value, (*path, key))
        if key == "when_query_matches":
            try:
                re.compile(value)
            except re.error as exc:
                raise _fail((*path, key), f"invalid regex {value!r}: {exc}") from exc
        data[key] = value
    return PolicyRule(**data)


def _conversation_judges(v: Any, path: Path) -> tuple[ConversationJudgeSpec, ...]:
    """`conversation_judges:` of a policy (docs/judges.md): the collector config's shape;
    a rubric that does not fit its token budget is refused here, not mid-evaluation."""
    out: list[ConversationJudgeSpec] = []
    names: set[str] = set()
    for k, item in enumerate(_list(v, path)):
        p = (*path, k)
        raw = _mapping(item, p)
        try:
            spec = ConversationJudgeSpec.model_validate(dict(raw))
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            where = (*p, *first["loc"])
            raise _fail(where, str(first["msg"])) from None
        if spec.name in names:
            raise _fail((*p, "name"), f"conversation judge {spec.name!r} defined twice")
        names.add(spec.name)
        try:
            compile_judge(spec)
        except ConversationJudgeError as exc:
            raise _fail((*p, "rubric"), str(exc)) from None
        out.append(spec)
    return tuple(out)


def _policy(v: Any, path: Path) -> Policy:
    raw = _mapping(v, path)
    _unknown(raw, _POLICY_KEYS, path)
    data: dict[str, Any] = {
        "id": _string(raw.get("id"), (*path, "id")),
        "agent": _string(raw.get("agent"), (*path, "agent")),
    }
    if raw.get("version") is not None:
        version = raw["version"]
        if isinstance(version, bool) or not isinstance(version, str | int | float):
            raise _fail((*path, "version"), f"expected a string, got {_type_name(version)}")
        data["version"] = str(version)
    if raw.get("tools") is not None:
        data["tools"] = _tools(raw["tools"], (*path, "tools"))
    if "rules" in raw:
        rp = (*path, "rules")
        data["rules"] = tuple(_rule(r, (*rp, k)) for k, r in enumerate(_list(raw["rules"], rp)))
    if "graders" in raw:
        data["graders"] = _graders(raw["graders"], (*path, "graders"))
    if raw.get("conversation_judges") is not None:
        data["conversation_judges"] = _conversation_judges(
            raw["conversation_judges"], (*path, "conversation_judges")
        )
    return Policy(**data)


def parse_policies(v: Any, path: Path) -> tuple[Policy, ...]:
    items = _list(v, path)
    errors: list[ReferenceLoadError] = []
    out: list[tuple[int, Policy]] = []
    for k, p in enumerate(items):
        try:
            out.append((k, _policy(p, (*path, k))))
        except ReferenceLoadError as exc:
            errors.extend(flatten(exc))
    seen: dict[str, int] = {}
    for k, policy in out:
        if policy.id in seen:
            errors.append(_fail((*path, k, "id"), f"duplicate policy id {policy.id!r}"))
        seen[policy.id] = k
    raise_collected(errors)
    return tuple(policy for _, policy in out)
