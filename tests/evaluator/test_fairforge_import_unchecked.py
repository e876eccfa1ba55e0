"""The Fair Forge importer checks every value itself and builds its models unchecked
(`construct_unchecked`): what it returns must equal validated construction of the same
data, on the sample dataset and on generated ones."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracepass.evaluator.models import Conversation, Reference
from tracepass.evaluator.references import ReferenceLoadError, import_fair_forge

SAMPLE = Path(__file__).parent.parent / "data" / "fair-forge" / "dataset_agentic.json"

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=6,
)
arguments = st.none() | st.dictionaries(st.text(max_size=3), json_values, max_size=3)
steps = st.none() | st.integers(min_value=0, max_value=5) | st.just(2.0)


def tool(result: bool) -> st.SearchStrategy[dict[str, Any]]:
    fields: dict[str, st.SearchStrategy[Any]] = {
        "tool_name": st.sampled_from(["a", "b", "c"]),
        "parameters": arguments | json_values,
        "step": steps,
    }
    if result:
        fields["result"] = json_values
    return st.fixed_dictionaries(fields)


def expected_tool() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {"tool_name": st.sampled_from(["a", "b", "c"]), "parameters": arguments, "step": steps}
    )


batch = st.fixed_dictionaries(
    {
        "query": st.text(max_size=5),
        "assistant": st.none() | st.text(max_size=5) | st.integers(),
        "ground_truth_assistant": st.none() | st.text(max_size=5),
        "agentic": st.none()
        | st.fixed_dictionaries(
            {
                "tools_used": st.lists(tool(result=True), max_size=3),
                "final_answer_uses_tools": st.none() | st.booleans() | st.integers(0, 1),
            }
        ),
        "ground_truth_agentic": st.none()
        | st.just({})
        | st.fixed_dictionaries(
            {
                "expected_tools": st.lists(expected_tool(), max_size=3),
                "tool_sequence_matters": st.booleans(),
            }
        ),
    }
)
dataset = st.fixed_dictionaries(
    {
        "session_id": st.sampled_from(["s1", "s2"]),
        "assistant_id": st.none() | st.text(max_size=3),
        "conversation": st.lists(batch, min_size=1, max_size=3),
    },
    optional={"language": st.text(max_size=3), "context": json_values},
)


def assert_same_as_validated(conversations: tuple[Conversation, ...], refs: Any) -> None:
    for conv in conversations:
        validated = Conversation.model_validate(conv.model_dump())
        assert conv == validated
        assert conv.model_dump_json() == validated.model_dump_json()
        assert conv.model_dump(mode="json", exclude_defaults=True) == validated.model_dump(
            mode="json", exclude_defaults=True
        )
    for ref in refs:
        validated_ref = Reference.model_validate(ref.model_dump())
        assert ref == validated_ref
        assert ref.model_dump_json() == validated_ref.model_dump_json()


def test_sample_equals_validated_construction() -> None:
    imported = import_fair_forge(json.loads(SAMPLE.read_text(encoding="utf-8")))
    assert len(imported.conversations) == 3
    assert_same_as_validated(imported.conversations, imported.reference_set.references)


@settings(max_examples=150, deadline=None)
@given(st.lists(dataset, min_size=1, max_size=3))
def test_generated_datasets_equal_validated_construction(data: list[dict[str, Any]]) -> None:
    for d, ds in enumerate(data):  # distinct tasks: no "ground truth differs" clashes
        for b, batch_ in enumerate(ds["conversation"]):
            batch_["qa_id"] = f"q{d}-{b}"
    imported = import_fair_forge(data)
    assert_same_as_validated(imported.conversations, imported.reference_set.references)


def test_non_string_parameter_names_are_refused_with_their_path() -> None:
    data = [
        {
            "session_id": "s",
            "conversation": [
                {
                    "qa_id": "q",
                    "query": "?",
                    "agentic": {"tools_used": [{"tool_name": "t", "parameters": {1: "x"}}]},
                }
            ],
        }
    ]
    with pytest.raises(ReferenceLoadError, match="parameter names must be strings") as info:
        import_fair_forge(data)
    assert info.value.path == (0, "conversation", 0, "agentic", "tools_used", 0, "parameters")


def _retyped(value: Any) -> Any:
    """The same ground truth as `==` sees it, with the types the import branches on
    changed: `tool_sequence_matters` true → 1, an int `step` → float."""
    if isinstance(value, dict):
        out = {k: _retyped(v) for k, v in value.items()}
        if isinstance(out.get("tool_sequence_matters"), bool):
            out["tool_sequence_matters"] = int(out["tool_sequence_matters"])
        if type(out.get("step")) is int:
            out["step"] = float(out["step"])
        return out
    if isinstance(value, list):
        return [_retyped(v) for v in value]
    return value


def _outcome(data: list[dict[str, Any]]) -> Any:
    try:
        return import_fair_forge(data).reference_set.references
    except ReferenceLoadError as exc:
        return exc.message


@settings(max_examples=200, deadline=None)
@given(dataset, dataset, st.sampled_from(["own", "same", "retyped"]))
def test_repeated_tasks_compare_ground_truth_as_pydantic_does(
    first: dict[str, Any], second: dict[str, Any], truth: str
) -> None:
    """Two datasets with the same qa_ids are trials of one task: accepted when their
    references, built separately, are equal models (pydantic ``==``), refused
    otherwise; a dataset whose ground truth is invalid fails as it does alone. The
    importer reuses the first trial's reference turns when the raw ground truth is
    equal, so equal-but-retyped values (``1 == True``, ``2 == 2.0``) are generated too."""
    n = min(len(first["conversation"]), len(second["conversation"]))
    first["conversation"] = first["conversation"][:n]
    second["conversation"] = second["conversation"][:n]
    for b in range(n):
        first["conversation"][b]["qa_id"] = second["conversation"][b]["qa_id"] = f"q{b}"
        if truth != "own":  # the usual case: the same ground truth, other agent outputs
            for key in ("query", "ground_truth_assistant", "ground_truth_agentic"):
                copied = json.loads(json.dumps(first["conversation"][b][key]))
                second["conversation"][b][key] = copied if truth == "same" else _retyped(copied)
    alone = [_outcome([first]), _outcome([second])]
    together = _outcome([first, second])
    for outcome in alone:
        if isinstance(outcome, str):  # invalid ground truth: the same error
            assert together == outcome
            return
    if alone[0] == alone[1]:
        assert together == alone[0]
    else:
        assert isinstance(together, str)
        assert "ground truth differs" in together
