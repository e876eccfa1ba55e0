"""`tracepass evaluate --config`: the collector's conversation judges, run offline over
the same conversations (a scripted langchain-core judge is the only fake part), in the
JSON document and the HTML report; unusable configurations exit 2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from typer.testing import CliRunner

from tracepass.collector.app.cli.main import app

DATASET = Path(__file__).resolve().parents[1] / "data" / "fair-forge" / "dataset_agentic.json"
runner = CliRunner()
PROMPTS: list[str] = []


class GoalJudge(BaseChatModel):
    """Passes a conversation whose prompt shows a calculator call; reasoning has markup."""

    @property
    def _llm_type(self) -> str:
        return "goal-judge"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        prompt = str(messages[-1].content)
        PROMPTS.append(prompt)
        score = 0.9 if "Tool call 1: calculator" in prompt else 0.1
        text = f'```json\n{{"reasoning": "<b>checked</b>", "score": {score}}}\n```'
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text))])


def make_judge() -> GoalJudge:
    return GoalJudge()


def _config(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "tracepass.yaml"
    path.write_text(body, encoding="utf-8")
    return path


JUDGES = f"""\
evaluation:
  judge: {__name__}:make_judge
  conversation_judges:
    - name: goal_completion
      rubric: goal_completion
    - name: polite
      rubric: Score 1 when the agent is polite, else 0.
      pass_threshold: 0.95
"""


def test_offline_judges_in_json_and_html(tmp_path: Path) -> None:
    PROMPTS.clear()
    config = _config(tmp_path, JUDGES)
    res = runner.invoke(
        app,
        ["evaluate", "--dataset", str(DATASET), "--config", str(config), "--format", "json",
         "--no-readiness-gate"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    judges = doc["summary"]["judges"]
    assert set(judges) == {"goal_completion", "polite"}
    goal = judges["goal_completion"]
    assert goal["series"] == "judge:goal_completion"
    assert goal["judged"] == 3
    assert goal["outcomes"] == {"pass": 3}
    assert goal["pass_rate"]["rate"] == 1.0
    assert goal["pass_pow_k"]["3"]["plugin"] == 1.0
    assert judges["polite"]["outcomes"] == {"fail": 3}  # 0.9 < its 0.95 threshold
    rows = doc["judgements"]
    assert len(rows) == 6
    assert {r["rubric_version"] for r in rows if r["name"] == "polite"} == {
        next(r["rubric_version"] for r in rows if r["name"] == "polite")
    }
    assert rows[0]["rubric_version"] == "tracepass-goal_completion-v1"
    assert rows[0]["model"] == "goal-judge"
    assert doc["conversations"][0]["judgements"][0]["name"] == "goal_completion"
    assert len(PROMPTS) == 6
    html_out = tmp_path / "report.html"
    res = runner.invoke(
        app,
        [
            "evaluate",
            "--dataset",
            str(DATASET),
            "--config",
            str(config),
            "--format",
            "html",
            "-o",
            str(html_out),
            "--no-readiness-gate",
        ],
    )
    assert res.exit_code == 0, res.output
    html = html_out.read_text(encoding="utf-8")
    assert 'id="judges"' in html
    assert "&lt;b&gt;checked&lt;/b&gt;" in html
    assert "<b>checked</b>" not in html


def test_unusable_judge_configurations_exit_2(tmp_path: Path) -> None:
    no_model = _config(
        tmp_path, "evaluation:\n  conversation_judges:\n    - {name: g, rubric: goal_completion}\n"
    )
    res = runner.invoke(app, ["evaluate", "--dataset", str(DATASET), "--config", str(no_model)])
    assert res.exit_code == 2
    assert "needs a model" in res.stderr
    too_long = _config(
        tmp_path,
        "evaluation:\n  judge: x:y\n  conversation_judges:\n"
        "    - {name: g, rubric: goal_completion, max_prompt_tokens: 300}\n",
    )
    res = runner.invoke(app, ["evaluate", "--dataset", str(DATASET), "--config", str(too_long)])
    assert res.exit_code == 2
    assert "tracepass.yaml:" in res.stderr
    assert "does not fit" in res.stderr
