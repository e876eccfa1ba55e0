"""The examples' scripted judge (the demo's conversation judge): real conversation-judge
prompts in, deterministic verdicts out; the demo config wires it."""

from __future__ import annotations

from pathlib import Path

from tracepass.collector.app.demo.examples import find_examples, load_scripted_judge
from tracepass.collector.app.demo.runner import demo_config
from tracepass.evaluator.judge.llm_judge import LLMJudge
from tracepass.evaluator.judge.model_loading import resolve_chat_model
from tracepass.evaluator.models import (
    Conversation,
    ConversationJudgeSpec,
    Outcome,
    ToolCall,
    Turn,
)
from tracepass.evaluator.scoring.evaluator import Evaluator

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _conversation(*, error: str | None = None, celsius: str = "18") -> Conversation:
    weather = ToolCall(
        name="get_weather",
        arguments={"city": "Paris"},
        result=None if error else {"celsius": 18.5},
        error=error,
    )
    return Conversation(
        id="d1",
        agent_name="travel-assistant",
        turns=(
            Turn(query="Weather in Paris?", answer=f"It is {celsius}.5 C.", tool_calls=(weather,)),
            Turn(query="Thanks", answer="You're welcome."),
        ),
    )


def test_scripted_judge_gives_deterministic_conversation_verdicts() -> None:
    spec = load_scripted_judge(find_examples(EXAMPLES))
    assert spec is not None
    spends: list[object] = []
    judge = LLMJudge(resolve_chat_model(spec), on_spend=spends.append)
    evaluator = Evaluator(
        judge=judge,
        conversation_judges=[
            ConversationJudgeSpec(name="goal_completion", rubric="goal_completion")
        ],
    )
    (good,) = evaluator.evaluate(_conversation(), None).judgements
    assert (good.outcome, good.score) == (Outcome.PASS, 0.9)
    (failed,) = evaluator.evaluate(_conversation(error="HTTP 503"), None).judgements
    assert failed.outcome is Outcome.FAIL
    assert "tool call failed" in (failed.reasoning or "")
    (ignored,) = evaluator.evaluate(_conversation(celsius="25"), None).judgements
    assert ignored.outcome is Outcome.FAIL
    assert "does not use the tool's result" in (ignored.reasoning or "")
    assert spends  # usage reported like a provider's


def test_demo_config_wires_the_scripted_judge(tmp_path: Path) -> None:
    ports = {"grpc": 0, "http": 0, "metrics": 0}
    config = demo_config(EXAMPLES / "references", tmp_path, ports, 60, judge="m:model")
    assert config.evaluation.judge == "m:model"
    assert [j.name for j in config.evaluation.conversation_judges] == ["goal_completion"]
    plain = demo_config(EXAMPLES / "references", tmp_path, ports, 60)
    assert plain.evaluation.conversation_judges == []
