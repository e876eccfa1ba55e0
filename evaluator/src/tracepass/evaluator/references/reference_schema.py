"""The native reference schema (docs/references.md): plain data → `ReferenceSet`.

The written form is friendlier than the model: a tool may be just its name, a grader
just its type, a single-turn reference may skip `turns:`, and `defaults:` sets the
grader / argument matcher / ordering for every turn. Everything is normalized here with
the field path kept, so errors say *where* (the loader adds file and line).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from tracepass.evaluator.models import (
    MAX_SIMULATED_TURNS,
    ExpectedTool,
    Policy,
    Reference,
    ReferenceSet,
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
    _validation,
)
from tracepass.evaluator.references.errors import (
    ReferenceLoadError,
    flatten,
    format_path,
    raise_collected,
)
from tracepass.evaluator.references.policy_schema import parse_policies
from tracepass.evaluator.scoring.argmatch import (
    MATCHERS,
    ArgumentMatchError,
    compile_matcher,
    resolve_callable,
    validate_matcher_name,
)

__all__ = ["Path", "parse_reference", "parse_reference_set"]

_SET_KEYS = {"name", "version", "defaults", "references", "policies"}
_DEFAULT_KEYS = {"graders", "argument_match", "tool_sequence_matters", "abs_tol", "rel_tol"}
_REF_KEYS = {"id", "turns", "match", "tags", "user"}
_USER_KEYS = {"instructions", "persona", "max_turns", "must_say", "must_not_say"}
_TURN_KEYS = {"query", "expected_answer", "graders", "expected_tools", "tool_sequence_matters"}
_TOOL_KEYS = {"name", "arguments", "argument_match", "abs_tol", "rel_tol", "agent"}


def _tool(v: Any, path: Path, defaults: Mapping[str, Any]) -> ExpectedTool:
    raw: dict[str, Any] = {"name": v} if isinstance(v, str) else dict(_mapping(v, path))
    _unknown(raw, _TOOL_KEYS, path)
    _string(raw.get("name"), (*path, "name"))
    if raw.get("agent") is not None:
        _string(raw["agent"], (*path, "agent"))
    for key in ("argument_match", "abs_tol", "rel_tol"):
        if key not in raw and key in defaults:
            raw[key] = defaults[key]
    mode = raw.get("argument_match", "exact")
    if not isinstance(mode, str):
        raise _fail((*path, "argument_match"), f"expected a string, got {_type_name(mode)}")
    problem = validate_matcher_name(mode)
    if problem is not None:
        raise _fail((*path, "argument_match"), problem)
    if mode not in MATCHERS:
        _refuse_code(mode, (*path, "argument_match"))
    args = raw.get("arguments")
    if args is not None and not isinstance(args, Mapping):
        raise _fail((*path, "arguments"), f"expected a mapping or null, got {_type_name(args)}")
    if mode == "regex" and args:
        for k, pat in args.items():
            if not isinstance(pat, str):
                continue
            try:
                re.compile(pat)
            except re.error as exc:
                raise _fail((*path, "arguments", str(k)), f"invalid regex {pat!r}: {exc}") from exc
    try:
        tool = ExpectedTool.model_validate(raw)
    except ValidationError as exc:
        raise _validation(exc, path) from exc
    if mode not in MATCHERS:
        try:
            resolve_callable(mode)  # import the custom callable now, not mid-scoring
            compile_matcher(tool)
        except ArgumentMatchError as exc:
            raise _fail((*path, "argument_match"), str(exc)) from exc
    return tool


def _user(v: Any, path: Path) -> dict[str, Any]:
    raw = _mapping(v, path)
    _unknown(raw, _USER_KEYS, path)
    out: dict[str, Any] = {
        "instructions": _string(raw.get("instructions"), (*path, "instructions"))
    }
    if raw.get("persona") is not None:
        out["persona"] = _string(raw["persona"], (*path, "persona"))
    if "max_turns" in raw:
        n = raw["max_turns"]
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_SIMULATED_TURNS:
            raise _fail(
                (*path, "max_turns"),
                f"expected an integer from 1 to {MAX_SIMULATED_TURNS}, got {n!r}",
            )
        out["max_turns"] = n
    for key in ("must_say", "must_not_say"):
        if key in raw:
            kp = (*path, key)
            out[key] = tuple(_string(x, (*kp, i)) for i, x in enumerate(_list(raw[key], kp)))
    return out


def _turn(
    v: Any, path: Path, defaults: Mapping[str, Any], *, simulated: bool = False
) -> dict[str, Any]:
    raw = {"query": v} if isinstance(v, str) else _mapping(v, path)
    _unknown(raw, _TURN_KEYS, path)
    if simulated and not raw.get("query"):
        query = ""  # the simulated user opens the conversation
    else:
        query = _string(raw.get("query"), (*path, "query"))
    out: dict[str, Any] = {"query": query}
    if raw.get("expected_answer") is not None:
        ans = raw["expected_answer"]
        if isinstance(ans, bool) or not isinstance(ans, str | int | float):
            raise _fail((*path, "expected_answer"), f"expected a string, got {_type_name(ans)}")
        out["expected_answer"] = str(ans)
    if "graders" in raw:
        out["graders"] = _graders(raw["graders"], (*path, "graders"))
    elif "graders" in defaults:
        out["graders"] = defaults["graders"]
    tools = raw.get("expected_tools")
    if tools is not None:
        tp = (*path, "expected_tools")
        out["expected_tools"] = tuple(
            _tool(t, (*tp, k), defaults) for k, t in enumerate(_list(tools, tp))
        )
    seq = raw.get("tool_sequence_matters", defaults.get("tool_sequence_matters", False))
    if not isinstance(seq, bool):
        raise _fail(
            (*path, "tool_sequence_matters"), f"expected true or false, got {_type_name(seq)}"
        )
    out["tool_sequence_matters"] = seq
    return out


def parse_reference(
    v: Any, path: Path = (), defaults: Mapping[str, Any] | None = None
) -> Reference:
    defaults = defaults or {}
    raw = _mapping(v, path)
    simulated = raw.get("user") is not None
    single = "turns" not in raw and ("query" in raw or simulated)
    _unknown(raw, _REF_KEYS | _TURN_KEYS if single else _REF_KEYS, path)
    rid = raw.get("id")
    if isinstance(rid, int) and not isinstance(rid, bool):
        rid = str(rid)
    data: dict[str, Any] = {"id": _string(rid, (*path, "id"))}
    if simulated:
        data["user"] = _user(raw["user"], (*path, "user"))
    if single:
        turn_raw = {k: raw[k] for k in _TURN_KEYS if k in raw}
        data["turns"] = (_turn(turn_raw, path, defaults, simulated=simulated),)
    elif simulated:
        tp = (*path, "turns")
        turns = _list(raw["turns"], tp)
        if len(turns) != 1:
            raise _fail(
                tp,
                "a reference with a simulated `user` has one turn (checked against the "
                f"whole conversation), got {len(turns)}",
            )
        data["turns"] = (_turn(turns[0], (*tp, 0), defaults, simulated=True),)
    else:
        if "turns" not in raw:
            raise _fail(path, "missing field 'turns' (or 'query' for a single-turn reference)")
        tp = (*path, "turns")
        turns = _list(raw["turns"], tp)
        if not turns:
            raise _fail(tp, "a reference needs at least one turn")
        data["turns"] = tuple(_turn(t, (*tp, k), defaults) for k, t in enumerate(turns))
    if "match" in raw:
        m = raw["match"]
        data["match"] = {"query": m} if isinstance(m, str) else m
    if "tags" in raw:
        tags = raw["tags"]
        data["tags"] = (tags,) if isinstance(tags, str) else tags
    try:
        return Reference.model_validate(data)
    except ValidationError as exc:
        raise _validation(exc, path) from exc


def _defaults(v: Any, path: Path) -> dict[str, Any]:
    raw = _mapping(v, path)
    _unknown(raw, _DEFAULT_KEYS, path)
    out = dict(raw)
    if "graders" in out:
        out["graders"] = _graders(out["graders"], (*path, "graders"))
    if "argument_match" in out:
        mode = out["argument_match"]
        problem = validate_matcher_name(mode) if isinstance(mode, str) else "expected a string"
        if problem is not None:
            raise _fail((*path, "argument_match"), problem)
        if mode not in MATCHERS:
            _refuse_code(mode, (*path, "argument_match"))
    return out


def _refuse_code(matcher: str, path: Path) -> None:
    """A callable matcher is code (graders/permissions.py): refused, unless allowed,
    before it is imported."""
    from tracepass.evaluator.graders.permissions import reference_code_refusal

    refusal = reference_code_refusal(f"argument_match {matcher!r}")
    if refusal is not None:
        raise _fail(path, refusal)


def parse_reference_set(data: Any, *, default_name: str) -> ReferenceSet:
    """A document: a mapping with `references:` and/or `policies:` (plus optional name,
    version, defaults), or a bare list of references."""
    rp: Path
    policies: tuple[Policy, ...] = ()
    policy_errors: tuple[ReferenceLoadError, ...] = ()
    if isinstance(data, list):
        refs, name, version, defaults, rp = data, default_name, "1", {}, ()
    else:
        raw = _mapping(data, ())
        _unknown(raw, _SET_KEYS, ())
        if "references" not in raw and "policies" not in raw:
            raise _fail((), "missing field 'references' (or 'policies')")
        if "policies" in raw:
            try:
                policies = parse_policies(raw["policies"], ("policies",))
            except ReferenceLoadError as exc:
                policy_errors = flatten(exc)
        name = _string(raw.get("name", default_name), ("name",))
        version = raw.get("version", "1")
        if isinstance(version, bool) or not isinstance(version, str | int | float):
            raise _fail(("version",), f"expected a string, got {_type_name(version)}")
        version = str(version)
        defaults = _defaults(raw["defaults"], ("defaults",)) if "defaults" in raw else {}
        refs, rp = raw.get("references", []), ("references",)
    items = _list(refs, rp)
    # Every reference is parsed even after a bad one, so all mistakes are reported at once.
    errors: list[ReferenceLoadError] = list(policy_errors)
    parsed: list[tuple[int, Reference]] = []
    for k, r in enumerate(items):
        try:
            parsed.append((k, parse_reference(r, (*rp, k), defaults)))
        except ReferenceLoadError as exc:
            errors.extend(flatten(exc))
    seen: dict[str, int] = {}
    for k, ref in parsed:
        if ref.id in seen:
            first = format_path((*rp, seen[ref.id]))
            errors.append(
                _fail((*rp, k, "id"), f"duplicate reference id {ref.id!r} (first at {first})")
            )
        seen[ref.id] = k
    raise_collected(errors)
    references = tuple(ref for _, ref in parsed)
    return ReferenceSet(name=name, version=version, references=references, policies=policies)
