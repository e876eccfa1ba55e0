"""Every documented scoring option is settable where users score: `serve`'s config
(`evaluation.trajectory_match`, `evaluation.utilization`, `evaluation.weights`, …) and
`tracepass evaluate`'s flags (issue 38, item 4's last bullet).

The case that motivated it: an ADK result whose tool call has a wrong argument scores
0.0 in ADK's `tool_trajectory_avg_score` (exact name + args). With the default
`trajectory_match: name` tracepass says `trajectory.exact: true` (names agree), with
`name_and_arguments` it says false, as docs/metrics.md documents. A real collector,
an instrumented agent exporting over OTLP/HTTP.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _live_support import FAST_CONFIG, clean_env, http_get, serve, wait_until
from typer.testing import CliRunner

from tracepass.collector.app.cli.main import app
from tracepass.collector.config import CollectorConfig, ConfigError, load_config
from tracepass.collector.service import build_evaluator
from tracepass.evaluator.scoring import EvaluationConfig

pytestmark = pytest.mark.slow  # starts a process or a server
REFS = """\
name: devices
references:
  - id: turn-off
    turns:
      - query: Turn off device_2 in the bedroom.
        expected_answer: device_2 is now off
        expected_tools:
          - name: set_device_info
            arguments: {device_id: device_2, status: "OFF"}
"""
AGENT = """
import sys
from tracepass.instrumentation import agent, configure, conversation, shutdown, tool
configure(service_name="devices", endpoint=sys.argv[1], protocol="http/protobuf")

@tool
def set_device_info(device_id: str, status: str) -> str:
    return f"{device_id} {status}"

@agent(name="devices", version="1")
def answer(query: str) -> str:
    set_device_info(device_id="device_2", status="ON")  # the wrong argument
    return "device_2 is now off"

with conversation("wrong-arg-1", reference_id="turn-off"):
    answer("Turn off device_2 in the bedroom.")
shutdown()
"""
SCORING = {
    "trajectory_match": "name_and_arguments",
    "utilization": "declared",
    "weights": {"selection": 0.5, "parameters": 0.5, "sequence": 0.0, "utilization": 0.0},
    "single_tool_use": ["set_device_info"],
    "repeated_call_limit": 3,
}


def test_config_scoring_options_reach_the_evaluator(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "evaluation:\n  trajectory_match: name_and_arguments\n  utilization: detected\n"
        "  weights: {selection: 1, parameters: 0, sequence: 0, utilization: 0}\n"
        "  single_tool_use: [search]\n  repeated_call_limit: 4\n",
        encoding="utf-8",
    )
    cfg = build_evaluator(load_config(path)).config
    assert cfg.trajectory_match == "name_and_arguments"
    assert cfg.utilization == "detected"
    assert cfg.weights.raw() == (1.0, 0.0, 0.0, 0.0)
    assert cfg.single_tool_use == ("search",)
    assert cfg.repeated_call_limit == 4
    # The defaults agree with the evaluator's own: no option scores differently in
    # `serve` than in Python.
    assert build_evaluator(CollectorConfig()).config == EvaluationConfig()
    # Every scoring field of EvaluationConfig is a config key (a new one must be added).
    settings = set(type(CollectorConfig().evaluation).model_fields)
    assert set(EvaluationConfig.model_fields) <= settings


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ("trajectory_match: names\n", "trajectory_match"),
        ("weights: {selection: 0, parameters: 0, sequence: 0, utilization: 0}\n", "weights"),
        ("weights: {selection: -1}\n", "selection"),
        ("utilisation: auto\n", "utilisation"),
    ],
)
def test_bad_scoring_options_are_refused_with_their_place(
    tmp_path: Path, body: str, needle: str
) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("evaluation:\n  " + body, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert needle in str(info.value)
    assert str(path) in str(info.value)


def _adk_wrong_argument(tmp_path: Path) -> Path:
    """An ADK eval-set result: expected `status: OFF`, the agent sent `status: ON`."""

    def invocation(status: str) -> dict[str, Any]:
        return {
            "invocation_id": "e-1",
            "user_content": {"role": "user", "parts": [{"text": "Turn off device_2."}]},
            "final_response": {"role": "model", "parts": [{"text": "device_2 is off."}]},
            "intermediate_data": {
                "tool_uses": [
                    {"name": "set_device_info", "args": {"device_id": "device_2", "status": status}}
                ],
                "tool_responses": [],
                "intermediate_responses": [],
            },
        }

    doc = {
        "eval_set_result_id": "r1",
        "eval_set_id": "devices",
        "eval_case_results": [
            {
                "eval_set_id": "devices",
                "eval_id": "turn_off",
                "final_eval_status": 2,
                "overall_eval_metric_results": [
                    {"metric_name": "tool_trajectory_avg_score", "threshold": 1.0, "score": 0.0}
                ],
                "eval_metric_result_per_invocation": [
                    {
                        "actual_invocation": invocation("ON"),
                        "expected_invocation": invocation("OFF"),
                        "eval_metric_results": [],
                    }
                ],
                "session_id": "s1",
            }
        ],
    }
    path = tmp_path / "run.evalset_result.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def _exact(args: list[str]) -> bool:
    res = CliRunner().invoke(app, ["evaluate", *args, "--format", "json", "--no-readiness-gate"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    (conv,) = doc["conversations"]
    return bool(conv["turns"][0]["trajectory"]["exact"])


def test_evaluate_flag_and_config_score_a_wrong_adk_argument(tmp_path: Path) -> None:
    data = _adk_wrong_argument(tmp_path)
    assert _exact(["--dataset", str(data)]) is True  # names agree
    assert _exact(["--dataset", str(data), "--trajectory-match", "name_and_arguments"]) is False
    config = tmp_path / "c.yaml"
    config.write_text("evaluation:\n  trajectory_match: name_and_arguments\n", encoding="utf-8")
    assert _exact(["--dataset", str(data), "--config", str(config)]) is False
    # The flag wins over the file.
    assert _exact(["--dataset", str(data), "--config", str(config), "--trajectory-match", "name"])
    bad = CliRunner().invoke(app, ["evaluate", "--dataset", str(data), "--weights", "speed=1"])
    assert bad.exit_code == 2
    assert "--weights" in bad.output


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_serve_accepts_scoring_options_and_scores_the_wrong_argument(tmp_path: Path) -> None:
    refs = tmp_path / "refs.yaml"
    refs.write_text(REFS, encoding="utf-8")
    config = {**FAST_CONFIG, "evaluation": SCORING}
    with serve(tmp_path, "--references", str(refs), config=config) as s:
        done = subprocess.run(
            [sys.executable, "-c", AGENT, s.http],
            capture_output=True, text=True, timeout=120, env=clean_env(), check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr

        def result() -> dict[str, Any] | None:
            status, body = http_get(f"{s.http}/api/v1/conversations/wrong-arg-1")
            return json.loads(body) if status == 200 else None

        doc = wait_until(result, 120, "the conversation evaluated")
    text = json.dumps(doc)
    evaluation = doc.get("evaluation", doc)
    turn = evaluation["turns"][0]
    assert turn["trajectory"]["exact"] is False, text  # name_and_arguments
    assert turn["single_tool_use"] == {"set_device_info": True}, text
    # weights 0.5/0.5/0/0: selection 1, parameters 0.5 (one of two keys) → 0.75
    tc = turn["tool_correctness"]
    assert tc["overall"] == pytest.approx(0.5 * tc["selection"] + 0.5 * tc["parameters"]), text
