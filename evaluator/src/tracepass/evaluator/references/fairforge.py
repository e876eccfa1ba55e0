"""Importer for Fair Forge datasets: a list of `Dataset` objects (one conversation each:
`session_id`, `assistant_id`, `context`, `conversation: [Batch]`), where a batch holds the
query, the agent's answer (`assistant`), the ground truth (`ground_truth_assistant`), what
the agent did with tools (`agentic`) and what it should have done
(`ground_truth_agentic`).

Several datasets with the same sequence of `qa_id`s are attempts at the same task (that is
how Fair Forge computes pass@K), so they become one `Reference` (id = the qa_ids joined
with "+") and one `Conversation` each. Fair Forge defaults are kept where its code has
them: `tool_sequence_matters` missing means True, tool calls are ordered by `step`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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

__all__ = ["import_fair_forge", "looks_like_fair_forge"]


def looks_like_fair_forge(data: Any) -> bool:
    return (
        isinstance(data, list)
        and bool(data)
        and isinstance(data[0], Mapping)
        and "conversation" in data[0]
        and ("session_id" in data[0] or "assistant_id" in data[0])
    )


def _req(m: Mapping[str, Any], key: str, path: Path, source: str) -> str:
    v = m.get(key)
    if not isinstance(v, str):
        what = "missing" if key not in m else f"expected a string, got {type(v).__name__}"
        raise ReferenceLoadError(f"{key!r}: {what}", file=source, path=path)
    return v


def _opt_map(m: Mapping[str, Any], key: str, path: Path, source: str) -> Mapping[str, Any]:
    v = m.get(key)
    if v is None:
        return {}
    if not isinstance(v, Mapping):
        raise ReferenceLoadError(
            f"expected a mapping or null, got {type(v).__name__}", file=source, path=(*path, key)
        )
    return v


def _by_step(items: Any, path: Path, source: str) -> list[tuple[int, Mapping[str, Any]]]:
    if items is None:
        return []
    if not isinstance(items, list):
        raise ReferenceLoadError(
            f"expected a list, got {type(items).__name__}", file=source, path=path
        )
    out: list[tuple[int, Mapping[str, Any]]] = []
    for k, t in enumerate(items):
        if not isinstance(t, Mapping) or not isinstance(t.get("tool_name"), str):
            raise ReferenceLoadError(
                "expected a mapping with a string 'tool_name'", file=source, path=(*path, k)
            )
        out.append((k, t))

    # stable: calls without a step keep their list position relative to each other
    def key(kt: tuple[int, Mapping[str, Any]]) -> int:
        step = kt[1].get("step")
        return step if isinstance(step, int) and not isinstance(step, bool) else kt[0]

    out.sort(key=key)
    return out


def _args(v: Any) -> dict[str, Any]:
    if v is None:
        return {}
    return dict(v) if isinstance(v, Mapping) else {"_raw": v}


def import_fair_forge(
    data: Any, *, source: str = "<fair-forge>", name: str = "fair-forge"
) -> ImportedDataset:
    if not isinstance(data, list):
        raise ReferenceLoadError("expected a list of Fair Forge datasets", file=source)
    refs: dict[str, tuple[Reference, int]] = {}
    convs: list[Conversation] = []
    used_ids: set[str] = set()
    for d, ds in enumerate(data):
        dp: Path = (d,)
        if not isinstance(ds, Mapping):
            raise ReferenceLoadError("expected a mapping (a Dataset)", file=source, path=dp)
        session = _req(ds, "session_id", dp, source)
        assistant = ds.get("assistant_id")
        batches = ds.get("conversation")
        if not isinstance(batches, list) or not batches:
            raise ReferenceLoadError(
                "expected a non-empty list of interactions", file=source, path=(*dp, "conversation")
            )
        ref_turns: list[ReferenceTurn] = []
        turns: list[Turn] = []
        qa_ids: list[str] = []
        for b, batch in enumerate(batches):
            bp: Path = (*dp, "conversation", b)
            if not isinstance(batch, Mapping):
                raise ReferenceLoadError("expected a mapping (a Batch)", file=source, path=bp)
            qa_ids.append(_req(batch, "qa_id", bp, source))
            query = _req(batch, "query", bp, source)
            gta = _opt_map(batch, "ground_truth_agentic", bp, source)
            expected: tuple[ExpectedTool, ...] | None = None
            seq = True
            if gta:  # Fair Forge skips tool checking when ground_truth_agentic is empty
                ep: Path = (*bp, "ground_truth_agentic", "expected_tools")
                expected = tuple(
                    ExpectedTool(name=t["tool_name"], arguments=t.get("parameters"))
                    if t.get("parameters") is None or isinstance(t.get("parameters"), Mapping)
                    else _bad_params(source, (*ep, k, "parameters"))
                    for k, t in _by_step(gta.get("expected_tools"), ep, source)
                )
                seq_v = gta.get("tool_sequence_matters", True)
                if not isinstance(seq_v, bool):
                    raise ReferenceLoadError(
                        "expected true or false",
                        file=source,
                        path=(*bp, "ground_truth_agentic", "tool_sequence_matters"),
                    )
                seq = seq_v
            gt = batch.get("ground_truth_assistant")
            ref_turns.append(
                ReferenceTurn(
                    query=query,
                    expected_answer=gt if isinstance(gt, str) else None,
                    expected_tools=expected,
                    tool_sequence_matters=seq,
                )
            )
            ag = _opt_map(batch, "agentic", bp, source)
            calls = tuple(
                ToolCall(
                    name=t["tool_name"],
                    arguments=_args(t.get("parameters")),
                    result=t.get("result"),
                )
                for _, t in _by_step(ag.get("tools_used"), (*bp, "agentic", "tools_used"), source)
            )
            fut = ag.get("final_answer_uses_tools")
            answer = batch.get("assistant")
            turns.append(
                Turn(
                    query=query,
                    answer=answer if isinstance(answer, str) else None,
                    tool_calls=calls,
                    final_answer_uses_tools=fut if isinstance(fut, bool) else None,
                )
            )
        ref_id = "+".join(qa_ids)
        ref = Reference(id=ref_id, turns=tuple(ref_turns))
        if ref_id in refs:
            if refs[ref_id][0] != ref:
                raise ReferenceLoadError(
                    f"datasets {refs[ref_id][1]} and {d} share qa_ids {ref_id!r} but their "
                    "ground truth differs",
                    file=source,
                    path=dp,
                )
        else:
            refs[ref_id] = (ref, d)
        conv_id = session if session not in used_ids else f"{session}/{assistant or d}"
        used_ids.add(conv_id)
        attrs: dict[str, Any] = {"fair_forge.assistant_id": assistant}
        for key in ("language", "context"):
            if ds.get(key) is not None:
                attrs[f"fair_forge.{key}"] = ds[key]
        convs.append(
            Conversation(id=conv_id, turns=tuple(turns), reference_id=ref_id, attributes=attrs)
        )
    rs = ReferenceSet(name=name, references=tuple(r for r, _ in refs.values()))
    return ImportedDataset(reference_set=rs, conversations=tuple(convs))


def _bad_params(source: str, path: Sequence[str | int]) -> ExpectedTool:
    raise ReferenceLoadError("expected a mapping or null", file=source, path=path)
