"""Reference loading: native YAML/JSON/JSONL, precise errors, Fair Forge and ADK imports."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tracepass.evaluator.models import ExpectedTool, ReferenceSet
from tracepass.evaluator.references import (
    ReferenceLoadError,
    dump_reference_set_yaml,
    import_adk,
    load_dataset,
    load_reference_sets,
)

DATA = Path(__file__).parent.parent / "data"


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_native_yaml_with_shorthands() -> None:
    (rs,) = load_reference_sets([DATA / "references" / "support.yaml"])
    assert (rs.name, rs.version) == ("support-bot", "3")
    order, weather = rs.references
    assert order.match.query == "where is my order*"
    assert order.tags == ("orders",)
    t0, t1 = order.turns
    assert t0.graders[0].type == "contains"
    assert t0.tool_sequence_matters
    assert t0.expected_tools == (ExpectedTool(name="lookup_order", arguments={"order_id": "A-1"}),)
    assert t1.expected_tools == ()
    (only,) = weather.turns  # single-turn shorthand
    assert only.expected_tools is not None
    assert only.expected_tools[0] == ExpectedTool(name="get_weather")
    assert only.expected_tools[1].argument_match == "regex"


def test_dump_round_trips(tmp_path: Path) -> None:
    (rs,) = load_reference_sets([DATA / "references" / "support.yaml"])
    text = dump_reference_set_yaml(rs)
    assert "- get_weather" in text  # name-only tools dump as plain names
    (again,) = load_reference_sets([write(tmp_path, "again.yaml", text)])
    assert again == rs


def test_json_and_jsonl_and_folders(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    write(
        tmp_path / "sub",
        "a.json",
        json.dumps([{"id": "j1", "query": "hi", "expected_answer": "hello"}]),
    )
    write(tmp_path, "b.jsonl", '{"id": "l1", "query": "x"}\n\n{"id": "l2", "turns": ["a", "b"]}\n')
    write(tmp_path, "ignored.txt", "not a reference")
    sets = load_reference_sets([tmp_path])
    assert sorted(r.id for s in sets for r in s.references) == ["j1", "l1", "l2"]
    assert {s.name for s in sets} == {"a", "b"}


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        (
            "refs.yaml",
            "references:\n  - id: r\n    turns:\n      - query: q\n        expected_tools:\n          - name: t\n          - name: u\n            argument_match: exakt\n",
            "refs.yaml:8: references[0].turns[0].expected_tools[1].argument_match: unknown matcher 'exakt' (expected one of exact, ignore, subset, superset, regex, numeric",
        ),
        (
            "refs.yaml",
            "references:\n  - id: r\n    turns:\n      - query: q\n        expected_anwser: x\n",
            "refs.yaml:5: references[0].turns[0].expected_anwser: unknown field",
        ),
        (
            "refs.yaml",
            "references:\n  - id: r\n    query: q\n  - id: r\n    query: q2\n",
            "refs.yaml:4: references[1].id: duplicate reference id 'r' (first at references[0])",
        ),
        (
            "refs.yaml",
            "references:\n  - id: r\n    turns: []\n",
            "refs.yaml:3: references[0].turns: a reference needs at least one turn",
        ),
        ("refs.yaml", "references: [\n", "refs.yaml:2: invalid YAML"),
        (
            "refs.json",
            '{"references": [\n  {"id": "r",\n   "turns": [{"query": 5}]}\n]}',
            "refs.json:3: references[0].turns[0].query: expected a non-empty string, got number",
        ),
        ("refs.json", '{"references": [\n  {"id": }]}', "refs.json:2: invalid JSON"),
        (
            "refs.jsonl",
            '{"id": "a", "query": "q"}\n{"id": "b", "query": "q", "expected_tools": [{"name": "t", "arguments": {"x": "("}, "argument_match": "regex"}]}\n',
            "refs.jsonl:2: expected_tools[0].arguments.x: invalid regex '('",
        ),
        (
            "refs.jsonl",
            '{"id": "a", "query": "q"}\n{"id": "a", "query": "q"}\n',
            "refs.jsonl:2: id: duplicate reference id 'a' (first on line 1)",
        ),
        (
            "refs.yaml",
            "references:\n  - id: r\n    query: q\n    graders: [{type: contains, mode: sometimes}]\n",
            "refs.yaml:4: references[0].graders[0]",
        ),
        (
            "refs.yaml",
            "references:\n  - id: r\n    query: q\n    expected_tools: [{name: t, argument_match: no_such_mod_q.x:f}]\n",
            "references[0].expected_tools[0].argument_match: matcher 'no_such_mod_q.x:f': cannot import",
        ),
    ],
)
def test_precise_errors(tmp_path: Path, name: str, text: str, message: str) -> None:
    p = write(tmp_path, name, text)
    with pytest.raises(ReferenceLoadError) as info:
        load_reference_sets([p])
    assert str(info.value).startswith(str(p)) or message.startswith("references")
    assert message in str(info.value)
    assert isinstance(info.value, ValueError)


def test_duplicate_ids_across_files(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", "references: [{id: r, query: q}]\n")
    write(tmp_path, "b.yaml", "references: [{id: r, query: q}]\n")
    with pytest.raises(ReferenceLoadError, match="duplicate reference id 'r' \\(also in"):
        load_reference_sets([tmp_path])


def test_missing_path() -> None:
    with pytest.raises(ReferenceLoadError, match="no such file"):
        load_reference_sets([Path("/nonexistent/refs.yaml")])


# --------------------------------------------------------------- Fair Forge


def test_fair_forge_dataset_import(tmp_path: Path) -> None:
    ds = load_dataset(DATA / "fair-forge" / "dataset_agentic.json")
    (ref,) = ds.reference_set.references
    assert ref.id == "q1_math+q2_weather+q3_complex"
    assert [c.id for c in ds.conversations] == [
        "agentic_eval_session",
        "agentic_eval_session2",
        "agentic_eval_session3",
    ]
    t3 = ref.turns[2]
    assert t3.tool_sequence_matters
    assert t3.expected_tools is not None
    assert len(t3.expected_tools) == 2
    conv = ds.conversations[2]
    assert conv.reference_id == ref.id
    assert conv.turns[0].answer == "I calculated 15 + 27 and got 53."
    assert conv.turns[1].tool_calls[0].arguments == {"location": "San Francisco"}
    assert conv.turns[1].tool_calls[0].result == {"temperature": 18, "condition": "partly cloudy"}
    assert conv.turns[1].final_answer_uses_tools is True
    assert conv.attributes["fair_forge.assistant_id"] == "agent_response_3"
    # reference-only view through the generic loader
    (rs,) = load_reference_sets([DATA / "fair-forge" / "dataset_agentic.json"])
    assert rs.references == ds.reference_set.references


def test_fair_forge_conflicting_ground_truth(tmp_path: Path) -> None:
    data = json.loads((DATA / "fair-forge" / "dataset_agentic.json").read_text())
    data[1]["conversation"][0]["ground_truth_assistant"] = "something else"
    p = write(tmp_path, "ff.json", json.dumps(data, indent=1))
    with pytest.raises(ReferenceLoadError, match="share qa_ids"):
        load_dataset(p)


def test_fair_forge_null_parameters_and_missing_agentic(tmp_path: Path) -> None:
    data = [
        {
            "session_id": "s",
            "assistant_id": "a",
            "context": "",
            "conversation": [
                {
                    "qa_id": "q",
                    "query": "hi",
                    "assistant": "hello",
                    "ground_truth_assistant": "hello",
                    "agentic": None,
                    "ground_truth_agentic": {
                        "expected_tools": [{"tool_name": "t", "parameters": None}]
                    },
                }
            ],
        }
    ]
    ds = load_dataset(write(tmp_path, "ff.json", json.dumps(data)))
    rt = ds.reference_set.references[0].turns[0]
    assert rt.expected_tools == (ExpectedTool(name="t", arguments=None),)
    assert rt.tool_sequence_matters  # Fair Forge's default when the key is absent
    assert ds.conversations[0].turns[0].tool_calls == ()


# --------------------------------------------------------------- Google ADK

EVALSET = {
    "eval_set_id": "home_automation",
    "eval_cases": [
        {
            "eval_id": "turn_off",
            "conversation": [
                {
                    "invocation_id": "i1",
                    "user_content": {"role": "user", "parts": [{"text": "Turn off device_2"}]},
                    "final_response": {
                        "role": "model",
                        "parts": [{"text": "Done: device_2 is off."}],
                    },
                    "intermediate_data": {
                        "tool_uses": [
                            {
                                "id": "c1",
                                "name": "set_device_info",
                                "args": {"device_id": "device_2", "status": "OFF"},
                            }
                        ],
                        "tool_responses": [
                            {"id": "c1", "name": "set_device_info", "response": {"ok": True}}
                        ],
                        "intermediate_responses": [],
                    },
                }
            ],
            "session_input": {"app_name": "home", "user_id": "u", "state": {}},
        },
        {
            "evalId": "simulated",
            "conversationScenario": {"startingPrompt": "hi", "conversationPlan": "x"},
        },
    ],
}


def test_adk_evalset(tmp_path: Path) -> None:
    ds = load_dataset(write(tmp_path, "home.evalset.json", json.dumps(EVALSET)))
    assert ds.reference_set.name == "home_automation"
    (ref,) = ds.reference_set.references
    (t,) = ref.turns
    assert t.query == "Turn off device_2"
    assert t.expected_answer == "Done: device_2 is off."
    assert t.expected_tools == (
        ExpectedTool(name="set_device_info", arguments={"device_id": "device_2", "status": "OFF"}),
    )
    assert t.tool_sequence_matters
    assert ds.conversations == ()
    assert len(ds.skipped) == 1
    assert "simulated" in ds.skipped[0]


def test_adk_camel_case_and_invocation_events() -> None:
    data = {
        "evalSetId": "s",
        "evalCases": [
            {
                "evalId": "c",
                "conversation": [
                    {
                        "userContent": {"parts": [{"text": "q"}]},
                        "finalResponse": {
                            "parts": [{"text": "thinking", "thought": True}, {"text": "a"}]
                        },
                        "intermediateData": {
                            "invocationEvents": [
                                {
                                    "author": "agent",
                                    "content": {
                                        "parts": [{"functionCall": {"name": "f", "args": {"x": 1}}}]
                                    },
                                }
                            ]
                        },
                    }
                ],
            }
        ],
    }
    rs = import_adk(data).reference_set
    t = rs.references[0].turns[0]
    assert (t.query, t.expected_answer) == ("q", "a")
    assert t.expected_tools == (ExpectedTool(name="f", arguments={"x": 1}),)


def test_adk_legacy_test_file(tmp_path: Path) -> None:
    legacy = [
        {
            "query": "hi",
            "expected_tool_use": [],
            "expected_intermediate_agent_responses": [],
            "reference": "hello",
        },
        {
            "query": "roll a die",
            "expected_tool_use": [{"tool_name": "roll_die", "tool_input": {"sides": 6}}],
            "expected_intermediate_agent_responses": [],
            "reference": "I rolled a 4",
        },
    ]
    (rs,) = load_reference_sets([write(tmp_path, "dice.test.json", json.dumps(legacy))])
    (ref,) = rs.references
    assert ref.id == "dice"
    assert len(ref.turns) == 2
    assert ref.turns[1].expected_tools == (ExpectedTool(name="roll_die", arguments={"sides": 6}),)


def test_adk_eval_results_give_conversations() -> None:
    inv = EVALSET["eval_cases"][0]["conversation"][0]  # type: ignore[index]
    actual = json.loads(json.dumps(inv))
    actual["final_response"]["parts"][0]["text"] = "It is off."
    data = {
        "eval_set_result_id": "r1",
        "eval_set_id": "home_automation",
        "eval_case_results": [
            {
                "eval_set_id": "home_automation",
                "eval_id": "turn_off",
                "session_id": "sess-1",
                "eval_metric_result_per_invocation": [
                    {"actual_invocation": actual, "expected_invocation": inv}
                ],
            }
        ],
    }
    ds = import_adk(data)
    (conv,) = ds.conversations
    assert conv.id == "sess-1"
    assert conv.reference_id == "turn_off"
    assert conv.turns[0].answer == "It is off."
    assert conv.turns[0].tool_calls[0].result == {"ok": True}
    assert isinstance(ds.reference_set, ReferenceSet)
    assert ds.reference_set.references[0].id == "turn_off"


def test_copied_sample_has_licence() -> None:
    assert shutil.which is not None
    assert (DATA / "fair-forge" / "LICENSE").read_text().startswith("MIT License")


def test_documented_example_loads(tmp_path: Path) -> None:
    import re

    doc = (Path(__file__).parent.parent.parent / "docs" / "references.md").read_text()
    match = re.search(r"```yaml\n(.*?)```", doc, re.S)
    assert match is not None
    (rs,) = load_reference_sets([write(tmp_path, "doc.yaml", match.group(1))])
    assert [r.id for r in rs.references] == ["order-status", "weather-paris"]
