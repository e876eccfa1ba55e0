"""`--format json` documents go through orjson (`common.dump_json`): they must parse to
the same data Python's `json` wrote before, on arbitrary JSON values and on real
`evaluate` reports (docs/cli.md, "JSON output")."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from tracepass.collector.app.cli import evaluate as evaluate_cli
from tracepass.collector.app.cli.common import dump_json, dump_json_bytes
from tracepass.collector.app.cli.main import app
from tracepass.evaluator.models import ConversationResult
from tracepass.evaluator.offline.evaluation_run import conversation_json

HERE = Path(__file__).resolve().parent
DATA = HERE.parent / "data"
runner = CliRunner()


def legacy(data: Any, *, default: Any = None) -> str:
    """The encoder every `--format json` document used before orjson; for `evaluate`,
    the conversations as `build_document` made them (`conversation_json`: model_dump),
    not through `report_default`."""

    def entry(obj: Any) -> Any:
        if isinstance(obj, ConversationResult):
            return conversation_json(obj)
        raise TypeError(f"unexpected {type(obj).__name__} in the report")

    return json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False, default=entry)


def legacy_bytes(data: Any, *, default: Any = None) -> bytes:
    return legacy(data, default=default).encode()


scalars = (
    st.none()
    | st.booleans()
    | st.integers()  # beyond 64 bits too: orjson refuses those, pydantic's encoder takes them
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=30,
)
float_free = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**63), max_value=2**64 - 1) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_parses_to_what_json_wrote(value: Any) -> None:
    assert json.loads(dump_json(value)) == json.loads(legacy(value))


@settings(max_examples=200, deadline=None)
@given(float_free)
def test_byte_identical_without_floats(value: Any) -> None:
    """Indentation, separators, escapes and non-ASCII text are exactly `json`'s; only
    the float format differs."""
    assert dump_json(value) == legacy(value)


def test_float_format_and_non_finite() -> None:
    values = [2.81e-05, 1e-07, 1e20, 0.1, 1.0]
    assert legacy(values) == "[\n  2.81e-05,\n  1e-07,\n  1e+20,\n  0.1,\n  1.0\n]"
    assert dump_json(values) == "[\n  0.0000281,\n  1e-7,\n  1e+20,\n  0.1,\n  1.0\n]"
    assert json.loads(dump_json([math.nan, math.inf, -math.inf])) == [None, None, None]
    with pytest.raises(ValueError, match="not JSON compliant"):
        legacy([math.nan])  # what the old encoder did: refuse the whole document
    assert json.loads(dump_json({"big": 2**70, 1: "key"})) == {"big": 2**70, "1": "key"}


def _evaluate(args: list[str], monkeypatch: pytest.MonkeyPatch, encoder: Any) -> Any:
    with monkeypatch.context() as m:
        m.setattr(evaluate_cli, "dump_json_bytes", encoder)
        res = runner.invoke(app, ["evaluate", *args, "--format", "json", "--no-readiness-gate"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


@pytest.mark.parametrize(
    "args",
    [
        ["--dataset", str(DATA / "fair-forge" / "dataset_agentic.json"), "--profile", "fair-forge"],
        ["--dataset", str(DATA / "fair-forge" / "dataset_agentic.json")],
        ["--dataset", str(DATA / "adk" / "home_automation_run1.evalset_result.json"), "--k", "1"],
    ],
    ids=["fair-forge-profile", "fair-forge-default", "adk-result"],
)
def test_evaluate_report_parses_to_the_same_document(
    args: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    new = _evaluate(args, monkeypatch, dump_json_bytes)
    old = _evaluate(args, monkeypatch, legacy_bytes)
    assert new["conversations"]
    assert new == old


@pytest.mark.slow  # starts a process or a server
def test_evaluate_traces_report_parses_to_the_same_document(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From OTLP traces of an instrumented agent (half its trials wrong) to the report."""
    traces = tmp_path / "v2.binpb"
    make = [sys.executable, str(HERE / "_make_traces.py"), str(traces)]
    subprocess.run(
        [*make, "--trials", "3", "--bug-every", "2"],
        check=True,
        timeout=120,
        capture_output=True,
    )
    args = [str(traces), "--references", str(HERE / "data" / "calc_refs.yaml")]
    new = _evaluate(args, monkeypatch, dump_json_bytes)
    assert new == _evaluate(args, monkeypatch, legacy_bytes)
    assert 0 < new["summary"]["correct"] < new["summary"]["matched"]


def test_report_default_writes_what_conversation_json_wrote() -> None:
    """Every model of a result: an excluded field (`arguments_source`), violations,
    policy verdicts, a turn with and one without a trajectory, a non-finite argument."""
    from tracepass.evaluator import models as tp
    from tracepass.evaluator.offline.evaluation_run import build_document, report_default

    call = tp.ToolCall(
        name="t", arguments={"x": 1, "nan": math.nan}, result={"r": [1, 2]}, arguments_source="log"
    )
    violation = tp.Violation(rule="forbidden_tool", turn=0, tool_call=0, message="no", path="$.x")
    base: dict[str, Any] = {
        "query": "q",
        "answer": "a",
        "answer_score": 0.5,
        "answer_correct": False,
        "graders": (tp.GraderResult(grader="contains", score=2.81e-05, passed=False),),
        "correct": False,
    }
    turns = (
        tp.TurnResult(
            index=0,
            tool_correctness=tp.ToolCorrectness(
                selection=1, parameters=0.5, sequence=1, utilization=0, overall=0.625, correct=False
            ),
            trajectory=tp.TrajectoryScores(
                exact=False, in_order=True, any_order=True, precision=1, recall=0.5, f1=2 / 3
            ),
            tool_calls=(call,),
            expected_tools=(tp.ExpectedTool(name="t", arguments={"x": 2}),),
            violations=(violation,),
            policy_passed=False,
            **base,
        ),
        tp.TurnResult(index=1, tool_correctness=None, single_tool_use={"t": True}, **base),
    )
    result = ConversationResult(
        conversation_id="c",
        reference_id=None,
        reference_set="policy:p",
        correct=False,
        outcome=tp.Outcome.FAIL,
        turns=turns,
        policy_id="p",
        policy_outcome=tp.Outcome.FAIL,
        violations=(violation,),
    )
    document = build_document([result], [1], as_models=True)
    new = json.loads(dump_json(document, default=report_default))
    entry = conversation_json(result)
    entry["turns"][0]["tool_calls"][0]["arguments"]["nan"] = None  # null, not refused
    assert new["conversations"] == [entry]
    assert "arguments_source" not in new["conversations"][0]["turns"][0]["tool_calls"][0]
    assert new["conversations"][0]["turns"][1]["trajectory"] == dict.fromkeys(
        ("exact", "in_order", "any_order", "precision", "recall", "f1")
    )
    # The summary is the same whether built from the models or from the JSON entries.
    old = json.loads(legacy({**build_document([result], [1]), "conversations": []}))
    assert new["summary"] == old["summary"]


def test_table_lists_the_failed_conversations(monkeypatch: pytest.MonkeyPatch) -> None:
    """The table format (no -o) dumps only the failed conversations it lists: the same
    rows as from the whole document."""
    args = ["evaluate", "--dataset", str(DATA / "fair-forge" / "dataset_agentic.json")]
    args.append("--no-readiness-gate")
    doc = _evaluate(args[1:], monkeypatch, dump_json_bytes)
    failed = [c for c in doc["conversations"] if not c["correct"]]
    assert failed
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert f"Failed conversations ({len(failed)})" in res.stdout
    for conv in failed:
        assert conv["conversation_id"] in res.stdout


def test_report_written_to_a_file_is_the_stdout_document(tmp_path: Path) -> None:
    args = ["evaluate", "--dataset", str(DATA / "fair-forge" / "dataset_agentic.json")]
    args.append("--no-readiness-gate")
    out = tmp_path / "sub" / "report.json"
    res = runner.invoke(app, [*args, "--format", "json", "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "wrote" in res.stderr
    stdout = runner.invoke(app, [*args, "--format", "json"]).stdout
    assert out.read_text(encoding="utf-8") + "\n" == stdout


def test_report_beyond_orjson_takes_the_fallback_encoder() -> None:
    """An integer beyond 64 bits (orjson refuses it) in a tool argument: the report is
    written through the fallback path, with the same entries."""
    from tracepass.evaluator import models as tp
    from tracepass.evaluator.offline.evaluation_run import build_document, report_default

    call = tp.ToolCall(name="t", arguments={"big": 2**70}, result=(1, 2), arguments_source="log")
    turn = tp.TurnResult(
        index=0,
        query="q",
        answer="a",
        answer_score=None,
        answer_correct=None,
        tool_correctness=None,
        tool_calls=(call,),
        correct=None,
    )
    result = tp.ConversationResult(
        conversation_id="c", reference_id="r", correct=False, outcome=tp.Outcome.FAIL, turns=(turn,)
    )
    new = json.loads(
        dump_json(build_document([result], [1], as_models=True), default=report_default)
    )
    assert new["conversations"] == [conversation_json(result)]
    assert new["conversations"][0]["turns"][0]["tool_calls"][0]["arguments"] == {"big": 2**70}
