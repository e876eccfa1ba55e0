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

User-simulation cases (`conversation_scenario`) have no fixed turns; they are skipped and
reported in `ImportedDataset.skipped`.
"""

from __future__ import annotations

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
from tracepass.evaluator.references.schema import Path

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
    return (
        isinstance(data, list)
        and bool(data)
        and isinstance(data[0], Mapping)
        and "query" in data[0]
        and "expected_tool_use" in data[0]
    )


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


def _calls(inter: Any) -> list[tuple[str, dict[str, Any], str | None]]:
    """(name, args, id) of the function calls in an invocation's intermediate data."""
    if not isinstance(inter, Mapping):
        return []
    found: list[Mapping[str, Any]] = []
    uses = _get(inter, "tool_uses")
    if isinstance(uses, list):
        found = [u for u in uses if isinstance(u, Mapping)]
    events = _get(inter, "invocation_events")
    if isinstance(events, list):
        for ev in events:
            content = ev.get("content") if isinstance(ev, Mapping) else None
            for p in (content or {}).get("parts") or []:
                fc = _get(p, "function_call") if isinstance(p, Mapping) else None
                if isinstance(fc, Mapping):
                    found.append(fc)
    out = []
    for fc in found:
        args = fc.get("args")
        out.append(
            (str(fc.get("name")), dict(args) if isinstance(args, Mapping) else {}, fc.get("id"))
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
    return ReferenceTurn(
        query=query,
        expected_answer=_text(_get(inv, "final_response")),
        expected_tools=tuple(ExpectedTool(name=n, arguments=a) for n, a, _ in _calls(inter)),
        tool_sequence_matters=True,
    )


def _turn(inv: Mapping[str, Any]) -> Turn:
    inter = _get(inv, "intermediate_data")
    results = _responses(inter)
    return Turn(
        query=_text(_get(inv, "user_content")),
        answer=_text(_get(inv, "final_response")),
        tool_calls=tuple(
            ToolCall(name=n, arguments=a, call_id=i, result=results.get(i) if i else None)
            for n, a, i in _calls(inter)
        ),
    )


def _legacy(data: list[Any], source: str, name: str) -> ImportedDataset:
    turns = []
    for k, item in enumerate(data):
        if not isinstance(item, Mapping) or not isinstance(item.get("query"), str):
            raise ReferenceLoadError(
                "expected a mapping with a string 'query'", file=source, path=(k,)
            )
        tools = []
        for t, use in enumerate(item.get("expected_tool_use") or []):
            if not isinstance(use, Mapping) or not isinstance(use.get("tool_name"), str):
                raise ReferenceLoadError(
                    "expected a mapping with a string 'tool_name'",
                    file=source,
                    path=(k, "expected_tool_use", t),
                )
            args = use.get("tool_input")
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
        raise ReferenceLoadError("empty test file", file=source)
    rs = ReferenceSet(name=name, references=(Reference(id=name, turns=tuple(turns)),))
    return ImportedDataset(reference_set=rs)


def import_adk(data: Any, *, source: str = "<adk>", name: str = "adk") -> ImportedDataset:
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
            eid = str(_get(res, "eval_id"))
            per = _get(res, "eval_metric_result_per_invocation") or []
            expected = [_get(p, "expected_invocation") for p in per if isinstance(p, Mapping)]
            actual = [_get(p, "actual_invocation") for p in per if isinstance(p, Mapping)]
            if expected and all(isinstance(e, Mapping) for e in expected) and eid not in refs:
                refs[eid] = Reference(
                    id=eid,
                    turns=tuple(
                        _ref_turn(
                            e,
                            (*cp, "eval_metric_result_per_invocation", k, "expected_invocation"),
                            source,
                        )
                        for k, e in enumerate(expected)
                    ),
                )
            turns = tuple(_turn(a) for a in actual if isinstance(a, Mapping))
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
