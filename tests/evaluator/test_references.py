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
        # Code named by the file allowed: the matcher's own import error is reported.
        load_reference_sets([p], allow_command_graders=True)
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


# --------------------------------------------------------------- ADK fixture files

ADK = DATA / "adk"


def test_adk_fixture_evalset_current_schema() -> None:
    ds = load_dataset(ADK / "home_automation.evalset.json")
    assert ds.reference_set.name == "home_automation"
    off, rooms = ds.reference_set.references
    assert off.id == "turn_off_then_check"
    assert [t.query for t in off.turns] == ["Turn off device_2 in the bedroom.", "Is it off now?"]
    assert off.turns[0].expected_tools == (
        ExpectedTool(
            name="set_device_info",
            arguments={"location": "Bedroom", "device_id": "device_2", "status": "OFF"},
        ),
    )
    assert off.turns[1].expected_tools == (
        ExpectedTool(name="get_device_info", arguments={"device_id": "device_2"}),
    )
    assert all(t.tool_sequence_matters for t in off.turns)
    # camelCase keys, invocation events (calls only, not responses), thought part left out
    (t,) = rooms.turns
    assert t.expected_answer == "The kitchen and the hall have lights on."
    assert t.expected_tools is not None
    assert [x.name for x in t.expected_tools] == ["list_rooms", "get_lights"]
    assert t.expected_tools[1].arguments == {"rooms": ["kitchen", "hall", "bedroom"]}
    (skip,) = ds.skipped
    assert "simulated_user_booking" in skip
    assert "user simulation" in skip


def test_adk_fixture_legacy_turn_list() -> None:
    (rs,) = load_reference_sets([ADK / "dice.test.json"])
    (ref,) = rs.references
    assert ref.id == "dice"
    hi, roll = ref.turns
    assert hi.expected_tools == ()  # "must call no tools"
    assert roll.expected_tools == (
        ExpectedTool(name="roll_die", arguments={"sides": 17}),
        ExpectedTool(name="roll_die", arguments={"sides": 17}),
    )
    assert roll.expected_answer == "I rolled a 17 sided die twice: 13 and 4."


def test_adk_fixture_legacy_case_list() -> None:
    """The older eval-set list (`{name, data, initial_session}` cases), which ADK still
    converts when a file does not validate against the current schema."""
    (rs,) = load_reference_sets([ADK / "dice_cases.test.json"])
    assert rs.name == "dice_cases"
    prime, what = rs.references
    assert (prime.id, what.id) == ("roll_and_check_prime", "what_can_you_do")
    assert [t.query for t in prime.turns] == ["Roll a 6 sided die", "Is it prime?"]
    assert prime.turns[1].expected_tools == (
        ExpectedTool(name="check_prime", arguments={"nums": [4]}),
    )
    assert what.turns[0].expected_tools == ()


def test_adk_fixture_double_encoded_results_score_end_to_end() -> None:
    from tracepass.evaluator.scoring.evaluator import EvaluationConfig, Evaluator

    ds = load_dataset(ADK / "home_automation_run1.evalset_result.json")
    (ref,) = ds.reference_set.references
    (conv,) = ds.conversations
    assert (conv.id, conv.reference_id) == ("___eval___session___3f0c", "turn_off_then_check")
    assert conv.turns[0].tool_calls[0].result == {
        "result": "Device device_2 information updated: status: OFF, location: Bedroom."
    }
    assert conv.turns[1].tool_calls == ()
    result = Evaluator(EvaluationConfig()).evaluate(conv, ref)
    # turn 2 expected get_device_info and called nothing: 0 on every dimension, not None
    tc = result.turns[1].tool_correctness
    assert tc is not None
    assert (tc.selection, tc.parameters, tc.sequence, tc.overall) == (0.0, 0.0, 0.0, 0.0)
    assert result.outcome == "fail"


def test_adk_folder_with_config_and_results(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "agent"
    shutil.copytree(ADK, folder / "tests")
    hist = folder / ".adk" / "eval_history"
    hist.mkdir(parents=True)
    shutil.move(folder / "tests" / "home_automation_run1.evalset_result.json", hist)
    with caplog.at_level("WARNING", logger="tracepass.evaluator.references.loader"):
        sets = load_reference_sets([folder])
    # test_config.json (ADK criteria) is skipped, results under .adk are not walked
    assert sorted(s.name for s in sets) == ["dice", "dice_cases", "home_automation"]
    logged = caplog.text
    assert "test_config.json: ADK eval config" in logged
    assert "simulated_user_booking" in logged
    # a results file named explicitly still loads
    (res,) = load_reference_sets([hist / "home_automation_run1.evalset_result.json"])
    assert [r.id for r in res.references] == ["turn_off_then_check"]


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        (
            "x.evalset.json",
            {
                "eval_set_id": "s",
                "eval_cases": [
                    {
                        "eval_id": "c",
                        "conversation": [
                            {
                                "user_content": {"parts": [{"text": "q"}]},
                                "intermediate_data": {"tool_uses": [{"args": {"a": 1}}]},
                            }
                        ],
                    }
                ],
            },
            "eval_cases[0].conversation[0].intermediate_data.tool_uses[0].name: "
            "function call without a 'name'",
        ),
        (
            "x.evalset.json",
            {
                "eval_set_id": "s",
                "eval_cases": [
                    {
                        "eval_id": "c",
                        "conversation": [
                            {
                                "user_content": {"parts": [{"text": "q"}]},
                                "intermediate_data": {
                                    "invocation_events": [
                                        {
                                            "author": "a",
                                            "content": {"parts": [{"function_call": {}}]},
                                        }
                                    ]
                                },
                            }
                        ],
                    }
                ],
            },
            "intermediate_data.invocation_events[0].content.parts[0].function_call.name",
        ),
        (
            "x.evalset.json",
            {"eval_set_id": "s", "eval_cases": [{"eval_id": "c", "conversation": [{}]}]},
            "eval_cases[0].conversation[0]: user_content has no text part",
        ),
        (
            "r.evalset_result.json",
            {"eval_case_results": [{"eval_metric_result_per_invocation": []}]},
            "eval_case_results[0].eval_id: expected a string 'eval_id'",
        ),
        (
            "r.evalset_result.json",
            {"eval_case_results": [{"eval_id": "c", "eval_metric_result_per_invocation": [3]}]},
            "eval_case_results[0].eval_metric_result_per_invocation[0]: expected a mapping",
        ),
        (
            "old.test.json",
            [
                {
                    "name": "a",
                    "data": [
                        {"query": "q", "expected_tool_use": [{"tool_name": "t", "tool_input": 5}]}
                    ],
                }
            ],
            "[0].data[0].expected_tool_use[0].tool_input: expected a mapping or null",
        ),
        (
            "old.test.json",
            [{"name": "a", "data": [{"query": "q"}]}, {"name": "a", "data": [{"query": "q"}]}],
            "[1].name: duplicate case name 'a'",
        ),
        (
            "old.test.json",
            [{"name": "a", "data": []}],
            "[0].data: expected at least one turn",
        ),
        ("enc.evalset_result.json", "not json", "a JSON string that is not an encoded ADK"),
    ],
)
def test_adk_precise_errors(tmp_path: Path, name: str, data: object, message: str) -> None:
    p = write(tmp_path, name, json.dumps(data, indent=1))
    with pytest.raises(ReferenceLoadError) as info:
        load_dataset(p)
    assert str(info.value).startswith(str(p))
    assert message in str(info.value)


# --------------------------------------------------------------- duplicate keys


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        (
            "d.yaml",
            "references:\n  - id: r\n    query: q1\n    expected_answer: a\n    query: q2\n",
            "d.yaml:5: invalid YAML: duplicate key 'query' (first on line 3)",
        ),
        (
            "d.json",
            '{"references": [\n {"id": "r",\n  "query": "q",\n  "id": "s"}\n]}',
            "d.json:4: invalid JSON: duplicate key 'id' (first on line 2)",
        ),
    ],
)
def test_duplicate_keys_are_errors_not_last_wins(
    tmp_path: Path, name: str, text: str, message: str
) -> None:
    p = write(tmp_path, name, text)
    with pytest.raises(ReferenceLoadError) as info:
        load_reference_sets([p])
    assert message in str(info.value)


def test_yaml_merge_keys_still_work(tmp_path: Path) -> None:
    text = "- &base {id: a, query: q, expected_answer: fine}\n- <<: *base\n  id: b\n"
    (rs,) = load_reference_sets([write(tmp_path, "m.yaml", text)])
    assert [(r.id, r.turns[0].query) for r in rs.references] == [("a", "q"), ("b", "q")]


def test_unknown_block_field_is_reported_on_its_key_line(tmp_path: Path) -> None:
    from tracepass.evaluator.references import ReferenceLoadError, load_reference_sets

    path = tmp_path / "r.yaml"
    path.write_text("name: s\nreferences:\n  - id: a\n    turnz:\n      - query: hi\n")
    with pytest.raises(ReferenceLoadError, match=r"r\.yaml:4: references\[0\]\.turnz"):
        load_reference_sets([path])


def test_expected_tool_may_name_its_agent() -> None:
    from tracepass.evaluator.references.reference_schema import parse_reference_set

    loaded = parse_reference_set(
        {
            "name": "s",
            "references": [
                {
                    "id": "r",
                    "turns": [
                        {"query": "q", "expected_tools": [{"name": "book", "agent": "booking"}]}
                    ],
                }
            ],
        },
        default_name="s",
    )
    (tool,) = loaded.references[0].turns[0].expected_tools or ()
    assert tool.agent == "booking"
