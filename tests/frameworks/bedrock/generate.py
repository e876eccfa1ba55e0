"""Amazon Bedrock corpus: a tool loop on the Bedrock Runtime `converse` API, boto3's real
client answered by botocore's `Stubber`, traced by OpenInference's Bedrock
instrumentation.

    python generate.py --list
    python generate.py bedrock_openinference_converse

No agent framework: the application calls `client.converse(...)` with the three harness
tools as a `toolConfig`, runs each `toolUse` block itself, sends the results back as
`toolResult` blocks (the failing call with `status: "error"`) and asks again until the
model answers in text. Only the model is fake: `Stubber` queues the script's steps as
`converse` responses (validated against the service model), so the request goes through
botocore's real parameter validation and event system, which the instrumentation wraps.

What the application adds, as a Bedrock loop does: a plain span per turn
(`travel-agent turn`) and `using_session(CONVERSATION_ID)`, OpenInference's session
context, since a converse call knows no session.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import generator_support as support
import harness

FRAMEWORK = "bedrock"
TURN_SPAN = f"{harness.AGENT_NAME} turn"
MODEL_ID = "anthropic.claude-3-5-sonnet-20240620-v1:0"

TOOL_CONFIG: dict[str, Any] = {
    "tools": [
        {
            "toolSpec": {
                "name": name,
                "description": fn.__doc__ or name,
                "inputSchema": {"json": {"type": "object"}},
            }
        }
        for name, fn in harness.TOOLS.items()
    ]
}


def converse_response(step: harness.Step) -> dict[str, Any]:
    """A script step as Bedrock's `converse` answers it."""
    content: list[dict[str, Any]]
    if step.tool_calls:
        content = [
            {"toolUse": {"toolUseId": c.id, "name": c.name, "input": c.arguments}}
            for c in step.tool_calls
        ]
    else:
        content = [{"text": step.text}]
    return {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": "tool_use" if step.tool_calls else "end_turn",
        "usage": {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15},
        "metrics": {"latencyMs": 1},
    }


def tool_result(block: dict[str, Any]) -> dict[str, Any]:
    call = block["toolUse"]
    try:
        result = harness.TOOLS[call["name"]](**call["input"])
    except harness.ToolFailure as exc:
        return {
            "toolResult": {
                "toolUseId": call["toolUseId"],
                "content": [{"text": str(exc)}],
                "status": "error",
            }
        }
    content = {"text": result} if isinstance(result, str) else {"json": {"result": result}}
    return {"toolResult": {"toolUseId": call["toolUseId"], "content": [content]}}


def run_turns(client: Any) -> list[str | None]:
    from openinference.instrumentation import using_session
    from opentelemetry import trace

    tracer = trace.get_tracer("travel-agent-app")
    messages: list[dict[str, Any]] = []
    answers: list[str | None] = []
    with using_session(harness.CONVERSATION_ID):
        for turn in harness.TURNS:
            with tracer.start_as_current_span(TURN_SPAN):
                messages.append({"role": "user", "content": [{"text": turn.query}]})
                while True:
                    response = client.converse(
                        modelId=MODEL_ID,
                        system=[{"text": harness.SYSTEM_PROMPT}],
                        messages=messages,
                        toolConfig=TOOL_CONFIG,
                    )
                    message = response["output"]["message"]
                    messages.append(message)
                    uses = [b for b in message["content"] if "toolUse" in b]
                    if not uses:
                        answers.append("".join(b.get("text", "") for b in message["content"]))
                        break
                    messages.append({"role": "user", "content": [tool_result(b) for b in uses]})
    return answers


def stubbed_run(
    service: str,
    stub: Callable[[Any, Any], None],
    run: Callable[[Any], list[str | None]],
) -> tuple[harness.Capture, list[str | None]]:
    """Instrument, build the boto3 `service` client (offline credentials), let `stub`
    queue its answers on a `Stubber`, and `run` the application with it; every queued
    answer must be used."""
    import boto3
    from botocore.stub import Stubber
    from openinference.instrumentation.bedrock import BedrockInstrumentor

    install = support.installer(BedrockInstrumentor)
    capture = harness.Capture()
    instrumentor = install(capture)
    client = boto3.client(
        service,
        region_name="us-east-1",
        aws_access_key_id="offline",
        aws_secret_access_key="offline",
    )
    stubber = Stubber(client)
    stub(client, stubber)
    try:
        with stubber:
            answers = run(client)
        stubber.assert_no_pending_responses()
    finally:
        instrumentor.uninstrument()
    return capture, answers


def stub_converse(client: Any, stubber: Any) -> None:
    for step in harness.model_steps():
        stubber.add_response("converse", converse_response(step))


def generate(scenario: str) -> Path:
    capture, answers = stubbed_run("bedrock-runtime", stub_converse, run_turns)
    support.check_answers(scenario, answers)
    meta = support.meta(
        FRAMEWORK,
        "openinference-instrumentation-bedrock",
        framework_package="boto3",
        settings={"using_session": harness.CONVERSATION_ID, "api": "converse"},
        agent_name=None,
        notes=[
            "No agent framework: a hand-rolled converse tool loop on boto3's bedrock-runtime "
            "client; the model is botocore's Stubber replaying the script.",
            f"The application wraps each turn in a plain span {TURN_SPAN!r}; tools are not "
            "traced, so calls are seen as the model's toolUse blocks and the next request's "
            "toolResult blocks (the failing call with status 'error').",
            json.dumps({"modelId": MODEL_ID}),
        ],
    )
    return capture.write(scenario, meta)


def generate_invoke_agent(scenario: str) -> Path:
    import invoke_agent

    capture, answers = stubbed_run(
        "bedrock-agent-runtime", invoke_agent.stub_turns, invoke_agent.run_turns
    )
    support.check_answers(scenario, answers)
    meta = support.meta(
        FRAMEWORK,
        "openinference-instrumentation-bedrock",
        framework_package="boto3",
        settings={
            "using_session": harness.CONVERSATION_ID,
            "api": "invoke_agent",
            "enableTrace": "True",
        },
        agent_name=None,
        notes=[
            "Bedrock Agents: one invoke_agent call per turn on boto3's bedrock-agent-runtime "
            "client; the agent (model and Lambda action group) is scripted as the completion "
            "event stream Stubber answers with: trace parts (orchestrationTrace model "
            "invocations, action-group invocations and observations, finalResponse) and the "
            "answer chunk, encoded as an AWS event stream that botocore decodes.",
            "Action-group parameters are strings with a type (nested filters as JSON text); "
            "the model's tool_use blocks carry the call ids and the nested arguments.",
            "The failing call's observation is its error text (a Lambda answering with "
            "responseState REPROMPT): Bedrock's trace has no status for an action group.",
            json.dumps({"agentId": invoke_agent.AGENT_ID, "model": invoke_agent.FOUNDATION_MODEL}),
        ],
    )
    return capture.write(scenario, meta)


SCENARIOS = {
    "bedrock_openinference_converse": generate,
    "bedrock_openinference_invoke_agent": generate_invoke_agent,
}

if __name__ == "__main__":
    raise SystemExit(support.run_cli(SCENARIOS, __doc__))
