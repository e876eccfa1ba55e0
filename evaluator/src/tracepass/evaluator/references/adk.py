"""Importer for Google ADK evaluation files.

* Eval sets (`*.evalset.json`, and `*.test.json` in the current format):
  ``{eval_set_id, eval_cases: [{eval_id, conversation: [Invocation]}]}`` where an
  invocation has `user_content`, `final_response` (genai `Content`: ``{parts: [{text}]}``)
  and `intermediate_data` (``{tool_uses: [{name, args}], tool_responses}`` or
  ``{invocation_events: [{content: {parts: [{function_call}]}}]}``). ADK writes either
  snake_case or camelCase keys; both are read. Each case becomes a `Reference`; tool
  order matters (ADK's default trajectory criterion is an exact in-order match).
* Eval results (`eval_case_results` with `actual_invocation` / `expected_invocation` per
  invocation): the expected side gives the reference, the actual side a `Conversation`.
* The older `*.test.json` format: a list of ``{query, expected_tool_use: [{tool_name,
  tool_input}], reference}`` turns forming one session → one `Reference` named after
  the file.
* The older eval-set format (what ADK converts on load when the current schema does not
  validate): a list of cases ``{name, data: [old-format turns], initial_session}`` → one
  `Reference` per case (id = `name`).
* Eval results as ADK's results manager writes them: the JSON document itself encoded
  as one JSON string (double-encoded); decoded here.

User-simulation cases (`conversation_scenario`) have no fixed turns; they are skipped and
reported in `ImportedDataset.skipped`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from tracepass.evaluator.models import (
    Conversation,
    ExpectedTool,
    Reference,
    ReferenceSet,
    ReferenceTurn,
    ToolCall,
    Turn,
)
from tracepass.evaluator.references.dataset import ImportedDataset
from tracepass.evaluator.references.errors import ReferenceLoadError
from tracepass.evaluator.references.reference_schema import Path

__all__ = ["import_adk", "looks_like_adk"]


def _camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(p.title() for p in rest)


def _get(m: Mapping[str, Any], key: str) -> Any:
    v = m.get(key)
    return m.get(_camel(key)) if v is None else v


def looks_like_adk(data: Any) -> bool:
    if isinstance(data, Mapping):
        return _get(data, "eval_cases") is not None or _get(data, "eval_case_results") is not None
    if not (isinstance(data, list) and data and isinstance(data[0], Mapping)):
        return False
    first = data[0]
    return ("query" in first and "expected_tool_use" in first) or _is_old_case(first)


def _is_old_case(item: Any) -> bool:
    """A case of the older eval-set list format: ``{name, data: [turns]}``."""
    return isinstance(item, Mapping) and "name" in item and isinstance(item.get("data"), list)


def _text(content: Any) -> str | None:
    if not isinstance(content, Mapping):
        return None
    parts = content.get("parts") or []
    texts = [
        p["text"]
        for p in parts
        if isinstance(p, Mapping) and isinstance(p.get("text"), str) and not p.get("thought")
    ]
    return "".join(texts) if texts else None


def _calls(inter: Any, path: Path, source: str) -> list[tuple[str, dict[str, Any], str | None]]:
    """(name, args, id) of the function calls in an invocation's intermediate data.

    A call without a name cannot be compared with anything; it is an error (with its
    path) rather than a tool silently named "None"."""
    if not isinstance(inter, Mapping):
        return []
    found: list[tuple[Mapping[str, Any], Path]] = []
    uses = _get(inter, "tool_uses")
    if isinstance(uses, list):
        key = "tool_uses" if "tool_uses" in inter else "toolUses"
        found = [(u, (*path, key, k)) for k, u in enumerate(uses) if isinstance(u, Mapping)]
    events = _get(inter, "invocation_events")
    if isinstance(events, list):
        key = "invocation_events" if "invocation_events" in inter else "invocationEvents"
        for e, ev in enumerate(events):
            content = ev.get("content") if isinstance(ev, Mapping) else None
            for k, p in enumerate((content or {}).get("parts") or []):
                fc = _get(p, "function_call") if isinstance(p, Mapping) else None
                if isinstance(fc, Mapping):
                    found.append((fc, (*path, key, e, "content", "parts", k, "function_call")))
    out = []
    for fc, fp in found:
        name = fc.get("name")
        if not isinstance(name, str) or not name:
            raise ReferenceLoadError(
                "function call without a 'name'", file=source, path=(*fp, "name")
            )
        args = fc.get("args")
        cid = fc.get("id")
        out.append(
            (
                name,
                dict(args) if isinstance(args, Mapping) else {},
                cid if isinstance(cid, str) else None,
            )
        )
    return out


def _responses(inter: Any) -> dict[str, Any]:
    if not isinstance(inter, Mapping):
        return {}
    found: list[Mapping[str, Any]] = []
    rs = _get(inter, "tool_responses")
    if isinstance(rs, list):
        found = [r for r in rs if isinstance(r, Mapping)]
    events = _get(inter, "invocation_events")
    if isinstance(events, list):
        for ev in events:
            content = ev.get("content") if isinstance(ev, Mapping) else None
            for p in (content or {}).get("parts") or []:
                fr = _get(p, "function_response") if isinstance(p, Mapping) else None
                if isinstance(fr, Mapping):
                    found.append(fr)
    return {r["id"]: r.get("response") for r in found if isinstance(r.get("id"), str)}


def _ref_turn(inv: Any, path: Path, source: str) -> ReferenceTurn:
    if not isinstance(inv, Mapping):
        raise ReferenceLoadError("expected an invocation mapping", file=source, path=path)
    query = _text(_get(inv, "user_content"))
    if query is None:
        raise ReferenceLoadError("user_content has no text part", file=source, path=path)
    inter = _get(inv, "intermediate_data")
    ip: Path = (*path, "intermediate_data")
    return ReferenceTurn(
        query=query,
        expected_answer=_text(_get(inv, "final_response")),
        expected_tools=tuple(
            ExpectedTool(name=n, arguments=a) for n, a, _ in _calls(inter, ip, source)
        ),
        tool_sequence_matters=True,
    )


def _turn(inv: Mapping[str, Any], path: Path, source: str) -> Turn:
    inter = _get(inv, "intermediate_data")
    results = _responses(inter)
    return Turn(
        query=_text(_get(inv, "user_content")),
        answer=_text(_get(inv, "final_response")),
        tool_calls=tuple(
            ToolCall(name=n, arguments=a, call_id=i, result=results.get(i) if i else None)
            for n, a, i in _calls(inter, (*path, "intermediate_data"), source)
        ),
    )


def _legacy_turns(data: list[Any], path: Path, source: str) -> tuple[ReferenceTurn, ...]:
    """Old-format turns: ``{query, expected_tool_use: [{tool_name, tool_input}], reference}``."""
    turns = []
    for k, item in enumerate(data):
        if not isinstance(item, Mapping) or not isinstance(item.get("query"), str):
            raise ReferenceLoadError(
                "expected a mapping with a string 'query'", file=source, path=(*path, k)
            )
        uses = item.get("expected_tool_use")
        if uses is not None and not isinstance(uses, list):
            raise ReferenceLoadError(
                "expected a list", file=source, path=(*path, k, "expected_tool_use")
            )
        tools = []
        for t, use in enumerate(uses or []):
            up: Path = (*path, k, "expected_tool_use", t)
            if not isinstance(use, Mapping) or not isinstance(use.get("tool_name"), str):
                raise ReferenceLoadError(
                    "expected a mapping with a string 'tool_name'", file=source, path=up
                )
            args = use.get("tool_input")
            if args is not None and not isinstance(args, Mapping):
                raise ReferenceLoadError(
                    "expected a mapping or null", file=source, path=(*up, "tool_input")
                )
            tools.append(ExpectedTool(name=use["tool_name"], arguments=dict(args or {})))
        ref = item.get("reference")
        turns.append(
            ReferenceTurn(
                query=item["query"],
                expected_answer=ref if isinstance(ref, str) else None,
                expected_tools=tuple(tools),
                tool_sequence_matters=True,
            )
        )
    if not turns:
        raise ReferenceLoadError("expected at least one turn", file=source, path=path)
    return tuple(turns)


def _legacy(data: list[Any], source: str, name: str) -> ImportedDataset:
    if not data:
        raise ReferenceLoadError("empty test file", file=source)
    if not _is_old_case(data[0]):  # one session: the file is the reference
        ref = Reference(id=name, turns=_legacy_turns(data, (), source))
        return ImportedDataset(reference_set=ReferenceSet(name=name, references=(ref,)))
    refs: dict[str, Reference] = {}
    for c, case in enumerate(data):
        if not _is_old_case(case) or not isinstance(case["name"], str) or not case["name"]:
            raise ReferenceLoadError(
                "expected a mapping with a string 'name' and a list 'data'",
                file=source,
                path=(c,),
            )
        cid = case["name"]
        if cid in refs:
            raise ReferenceLoadError(f"duplicate case name {cid!r}", file=source, path=(c, "name"))
        refs[cid] = Reference(id=cid, turns=_legacy_turns(case["data"], (c, "data"), source))
    return ImportedDataset(reference_set=ReferenceSet(name=name, references=tuple(refs.values())))


def import_adk(data: Any, *, source: str = "<adk>", name: str = "adk") -> ImportedDataset:
    if isinstance(data, str):
        # ADK's local results manager stores `model_dump_json()` through `json.dump`,
        # so an `*.evalset_result.json` file holds one JSON string.
        try:
            data = json.loads(data)
        except json.JSONDecodeError as exc:
            raise ReferenceLoadError(
                f"a JSON string that is not an encoded ADK document: {exc.msg}", file=source
            ) from exc
    if isinstance(data, list):
        return _legacy(data, source, name)
    if not isinstance(data, Mapping):
        raise ReferenceLoadError("expected an ADK eval set or eval result mapping", file=source)
    set_name = _get(data, "eval_set_id") or _get(data, "name") or name
    refs: dict[str, Reference] = {}
    convs: list[Conversation] = []
    skipped: list[str] = []
    cases = _get(data, "eval_cases")
    results = _get(data, "eval_case_results")
    if cases is not None:
        if not isinstance(cases, list):
            raise ReferenceLoadError("expected a list", file=source, path=("eval_cases",))
        for c, case in enumerate(cases):
            cp: Path = ("eval_cases", c)
            if not isinstance(case, Mapping) or not isinstance(_get(case, "eval_id"), str):
                raise ReferenceLoadError(
                    "expected a mapping with a string 'eval_id'", file=source, path=cp
                )
            eid = _get(case, "eval_id")
            conv = case.get("conversation")
            if conv is None:
                skipped.append(
                    f"{source}: eval case {eid!r} has no static conversation (user simulation); skipped"
                )
                continue
            if not isinstance(conv, list) or not conv:
                raise ReferenceLoadError(
                    "expected a non-empty list", file=source, path=(*cp, "conversation")
                )
            if eid in refs:
                raise ReferenceLoadError(
                    f"duplicate eval_id {eid!r}", file=source, path=(*cp, "eval_id")
                )
            refs[eid] = Reference(
                id=eid,
                turns=tuple(
                    _ref_turn(inv, (*cp, "conversation", k), source) for k, inv in enumerate(conv)
                ),
            )
    elif isinstance(results, list):
        for c, res in enumerate(results):
            cp = ("eval_case_results", c)
            if not isinstance(res, Mapping):
                raise ReferenceLoadError("expected a mapping", file=source, path=cp)
            eid = _get(res, "eval_id")
            if not isinstance(eid, str) or not eid:
                raise ReferenceLoadError(
                    "expected a string 'eval_id'", file=source, path=(*cp, "eval_id")
                )
            per = _get(res, "eval_metric_result_per_invocation") or []
            ip: Path = (*cp, "eval_metric_result_per_invocation")
            if not isinstance(per, list):
                raise ReferenceLoadError("expected a list", file=source, path=ip)
            for k, p in enumerate(per):
                if not isinstance(p, Mapping):
                    raise ReferenceLoadError("expected a mapping", file=source, path=(*ip, k))
            expected = [_get(p, "expected_invocation") for p in per]
            actual = [_get(p, "actual_invocation") for p in per]
            if expected and all(isinstance(e, Mapping) for e in expected) and eid not in refs:
                refs[eid] = Reference(
                    id=eid,
                    turns=tuple(
                        _ref_turn(e, (*ip, k, "expected_invocation"), source)
                        for k, e in enumerate(expected)
                    ),
                )
            turns = tuple(
                _turn(a, (*ip, k, "actual_invocation"), source)
                for k, a in enumerate(actual)
                if isinstance(a, Mapping)
            )
            sid = _get(res, "session_id")
            convs.append(
                Conversation(
                    id=str(sid) if sid else f"{eid}#{c}",
                    turns=turns,
                    reference_id=eid,
                    attributes={"adk.eval_id": eid},
                )
            )
    else:
        raise ReferenceLoadError("missing 'eval_cases' (or 'eval_case_results')", file=source)
    rs = ReferenceSet(name=str(set_name), references=tuple(refs.values()))
    return ImportedDataset(reference_set=rs, conversations=tuple(convs), skipped=tuple(skipped))
