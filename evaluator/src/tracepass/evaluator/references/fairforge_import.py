"""Importer for Fair Forge datasets: a list of `Dataset` objects (one conversation each:
`session_id`, `assistant_id`, `context`, `conversation: [Batch]`), where a batch holds the
query, the agent's answer (`assistant`), the ground truth (`ground_truth_assistant`), what
the agent did with tools (`agentic`) and what it should have done
(`ground_truth_agentic`).

Several datasets with the same sequence of `qa_id`s are attempts at the same task (that is
how Fair Forge computes pass@K), so they become one `Reference` (id = the qa_ids joined
with "+") and one `Conversation` each. Fair Forge defaults are kept where its code has
them: `tool_sequence_matters` missing means True, tool calls are ordered by `step`.

Every value is type-checked here, field by field, with errors that name the dataset path;
the models are then built unchecked (`construct_unchecked`): validating them again cost
more than the rest of the import (`tracepass evaluate --dataset`, docs/performance.md),
and tests/evaluator/test_fairforge.py checks the result equals validated construction.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeGuard

from tracepass.evaluator.models import (
    Conversation,
    ExpectedTool,
    MatchSpec,
    Reference,
    ReferenceSet,
    ReferenceTurn,
    ToolCall,
    Turn,
    construct_unchecked,
)
from tracepass.evaluator.references.dataset import ImportedDataset
from tracepass.evaluator.references.errors import ReferenceLoadError
from tracepass.evaluator.references.reference_schema import Path

__all__ = ["import_fair_forge", "looks_like_fair_forge"]


def looks_like_fair_forge(data: Any) -> bool:
    return (
        isinstance(data, list)
        and bool(data)
        and isinstance(data[0], Mapping)
        and "conversation" in data[0]
        and ("session_id" in data[0] or "assistant_id" in data[0])
    )


def _is_mapping(v: Any) -> TypeGuard[Mapping[str, Any]]:
    # `type(...) is dict` first: parsed JSON is dicts, and an ABC isinstance check costs
    # more than the rest of a value's import.
    return type(v) is dict or isinstance(v, Mapping)


_is_str = str.__instancecheck__


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
    if not _is_mapping(v):
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
        if not _is_mapping(t) or not isinstance(t.get("tool_name"), str):
            raise ReferenceLoadError(
                "expected a mapping with a string 'tool_name'", file=source, path=(*path, k)
            )
        out.append((k, t))

    # stable: calls without a step keep their list position relative to each other
    def key(kt: tuple[int, Mapping[str, Any]]) -> int:
        step = kt[1].get("step")
        return step if isinstance(step, int) and not isinstance(step, bool) else kt[0]

    if len(out) > 1:
        out.sort(key=key)
    return out


def _args(v: Any, path: Path, source: str) -> dict[str, Any]:
    if v is None:
        return {}
    if not _is_mapping(v):
        return {"_raw": v}
    return _str_keys(v, path, source)


def _str_keys(v: Mapping[str, Any], path: Path, source: str) -> dict[str, Any]:
    """A copy of `v` (arguments are `dict[str, Any]`); JSON keys are always strings, a
    YAML dataset's may not be."""
    out = dict(v)
    if not all(map(_is_str, out)):
        bad = next(k for k in out if not isinstance(k, str))
        raise ReferenceLoadError(
            f"parameter names must be strings, got {bad!r}", file=source, path=path
        )
    return out


def _expected_tool(t: Mapping[str, Any], path: Path, source: str) -> ExpectedTool:
    params = t.get("parameters")
    if params is not None and not _is_mapping(params):
        raise ReferenceLoadError("expected a mapping or null", file=source, path=path)
    return construct_unchecked(
        ExpectedTool,
        {
            "name": t["tool_name"],
            "arguments": None if params is None else _str_keys(params, path, source),
            "argument_match": "exact",
            "abs_tol": 0.0,
            "rel_tol": 1e-9,
            "agent": None,
        },
    )


def import_fair_forge(
    data: Any, *, source: str = "<fair-forge>", name: str = "fair-forge"
) -> ImportedDataset:
    if not isinstance(data, list):
        raise ReferenceLoadError("expected a list of Fair Forge datasets", file=source)
    refs: dict[str, tuple[Reference, int]] = {}
    seen: dict[str, tuple[tuple[Any, ...], Any, ReferenceTurn]] = {}
    convs: list[Conversation] = []
    used_ids: set[str] = set()
    for d, ds in enumerate(data):
        dp: Path = (d,)
        if not _is_mapping(ds):
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
            if not _is_mapping(batch):
                raise ReferenceLoadError("expected a mapping (a Batch)", file=source, path=bp)
            qa_id = _req(batch, "qa_id", bp, source)
            qa_ids.append(qa_id)
            query = _req(batch, "query", bp, source)
            # Repeated trials of a task repeat its ground truth: the reference turn the
            # first one built is reused when the raw values are equal and so are the
            # types the import branches on (`==` says 1 == 1.0 == True).
            truth = (query, batch.get("ground_truth_assistant"), batch.get("ground_truth_agentic"))
            hit = seen.get(qa_id)
            if hit is not None and hit[0] == truth and hit[1] == _types_read(truth[2]):
                ref_turns.append(hit[2])
            else:
                rt = _reference_turn(batch, query, bp, source)
                ref_turns.append(rt)
                if hit is None:
                    seen[qa_id] = (truth, _types_read(truth[2]), rt)
            ag = _opt_map(batch, "agentic", bp, source)
            up: Path = (*bp, "agentic", "tools_used")
            calls = tuple(
                construct_unchecked(
                    ToolCall,
                    {
                        "name": t["tool_name"],
                        "arguments": _args(t.get("parameters"), (*up, k, "parameters"), source),
                        "result": t.get("result"),
                        "error": None,
                        "call_id": None,
                        "start_ns": None,
                        "arguments_source": None,
                        "agent": None,
                    },
                )
                for k, t in _by_step(ag.get("tools_used"), up, source)
            )
            fut = ag.get("final_answer_uses_tools")
            answer = batch.get("assistant")
            turns.append(
                construct_unchecked(
                    Turn,
                    {
                        "query": query,
                        "answer": answer if isinstance(answer, str) else None,
                        "tool_calls": calls,
                        "final_answer_uses_tools": fut if isinstance(fut, bool) else None,
                        "error": None,
                        "trace_id": None,
                        "span_id": None,
                        "start_ns": None,
                        "end_ns": None,
                        "offered_tools": None,
                        "tool_schemas": {},
                        "spans": (),
                        "usage": None,
                        "latency": None,
                        "steps": (),
                    },
                )
            )
        ref_id = "+".join(qa_ids)
        ref = construct_unchecked(
            Reference,
            {"id": ref_id, "turns": tuple(ref_turns), "match": _NO_MATCH, "tags": (), "user": None},
        )
        if ref_id in refs:
            if not _same_reference(refs[ref_id][0], ref):
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
            construct_unchecked(
                Conversation,
                {
                    "id": conv_id,
                    "agent_name": None,
                    "agent_version": None,
                    "turns": tuple(turns),
                    "reference_id": ref_id,
                    "trace_ids": (),
                    "complete": True,
                    "attributes": attrs,
                    "usage": None,
                    "latency": None,
                },
            )
        )
    rs = ReferenceSet(name=name, references=tuple(r for r, _ in refs.values()))
    return ImportedDataset(reference_set=rs, conversations=tuple(convs))


_NO_MATCH = MatchSpec()


def _reference_turn(batch: Mapping[str, Any], query: str, bp: Path, source: str) -> ReferenceTurn:
    gta = _opt_map(batch, "ground_truth_agentic", bp, source)
    expected: tuple[ExpectedTool, ...] | None = None
    seq = True
    if gta:  # Fair Forge skips tool checking when ground_truth_agentic is empty
        ep: Path = (*bp, "ground_truth_agentic", "expected_tools")
        expected = tuple(
            _expected_tool(t, (*ep, k, "parameters"), source)
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
    return construct_unchecked(
        ReferenceTurn,
        {
            "query": query,
            "expected_answer": gt if isinstance(gt, str) else None,
            "graders": (),
            "expected_tools": expected,
            "tool_sequence_matters": seq,
        },
    )


def _types_read(gta: Any) -> Any:
    """The types `_reference_turn` branches on in an (already valid) ground truth:
    `tool_sequence_matters` must be a bool, a `step` orders calls only as an int."""
    if not gta:
        return None
    tools = gta.get("expected_tools") or ()
    return type(gta.get("tool_sequence_matters", True)), tuple(type(t.get("step")) for t in tools)


def _same_reference(a: Reference, b: Reference) -> bool:
    """``a == b`` for two references built above (the fields this importer sets, each
    compared with ``==`` as pydantic compares them), without pydantic's generic
    ``__eq__`` per nested model: every repeated trial of a task compares its ground
    truth with the first one, and that comparison cost as much as building it."""
    if a.id != b.id or len(a.turns) != len(b.turns):
        return False
    for ta, tb in zip(a.turns, b.turns, strict=True):
        if ta is tb:  # a reused reference turn (the usual case)
            continue
        if (ta.query, ta.expected_answer, ta.tool_sequence_matters) != (
            tb.query,
            tb.expected_answer,
            tb.tool_sequence_matters,
        ):
            return False
        ea, eb = ta.expected_tools, tb.expected_tools
        if ea is None or eb is None:
            if ea is not eb:
                return False
        elif len(ea) != len(eb) or any(
            x.__dict__ != y.__dict__ for x, y in zip(ea, eb, strict=True)
        ):
            return False
    return True
