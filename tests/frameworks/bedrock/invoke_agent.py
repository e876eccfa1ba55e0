"""Bedrock Agents' `invoke_agent` with the trace stream, as `Stubber` answers it.

The application is what a Bedrock Agents user writes: one `invoke_agent` call per turn on
boto3's real `bedrock-agent-runtime` client (`sessionId` the conversation, `enableTrace`),
reading the `completion` event stream for the answer. The agent itself — the orchestration
loop, the model and the Lambda-backed action group running the three tools — lives in the
service; here it is scripted: for each turn the stream carries the trace parts Bedrock
sends with `enableTrace=True` (per model step an `orchestrationTrace` with
`modelInvocationInput` / `modelInvocationOutput` (the model's raw Anthropic response with
`tool_use` blocks), per tool call an `invocationInput` (action group, function,
parameters) and its `observation` (the action group's output text), and at the end the
`finalResponse` observation) and the answer as a `chunk`. The tools' outputs are the
harness tools' real results (the failing call's output is its error message, as a Lambda
answers with `responseState: REPROMPT`).
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterator
from typing import Any

import harness
from event_stream import completion_stream

AGENT_ID = "TRAVELAGT1"
AGENT_ALIAS_ID = "TSTALIASID"
ACTION_GROUP = "travel-actions"
FOUNDATION_MODEL = "anthropic.claude-3-5-sonnet-20240620-v1:0"
_EPOCH = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def _parameter(name: str, value: Any) -> dict[str, str]:
    """An action-group parameter: Bedrock passes every value as a string with its type."""
    if isinstance(value, str):
        return {"name": name, "type": "string", "value": value}
    kind = "number" if isinstance(value, int | float) else "object"
    return {"name": name, "type": kind, "value": json.dumps(value)}


def _output_text(call: harness.ToolCall) -> str:
    result, error = harness.run_tool(call)
    if error is not None:
        return error
    return result if isinstance(result, str) else json.dumps(result)


def _raw_response(step: harness.Step, index: int) -> str:
    """The model's answer as Bedrock records it: the Anthropic Messages response JSON."""
    content: list[dict[str, Any]]
    if step.tool_calls:
        content = [
            {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}
            for c in step.tool_calls
        ]
    else:
        content = [{"type": "text", "text": step.text}]
    return json.dumps(
        {
            "id": f"msg_{index}",
            "type": "message",
            "role": "assistant",
            "model": FOUNDATION_MODEL,
            "content": content,
            "stop_reason": "tool_use" if step.tool_calls else "end_turn",
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }
    )


def _prompt(turn: harness.Turn, upto: int) -> str:
    """The orchestration prompt Bedrock sends the model: system text and the messages."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": turn.query}]
    for step in turn.steps[:upto]:
        uses = [
            {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}
            for c in step.tool_calls
        ]
        results = [
            {"type": "tool_result", "tool_use_id": c.id, "content": _output_text(c)}
            for c in step.tool_calls
        ]
        messages.append({"role": "assistant", "content": json.dumps(uses)})
        messages.append({"role": "user", "content": json.dumps(results)})
    return json.dumps({"system": harness.SYSTEM_PROMPT, "messages": messages})


class _Clock:
    """Trace-part times one millisecond apart (Bedrock stamps every part)."""

    def __init__(self, turn_index: int) -> None:
        self._now = _EPOCH + datetime.timedelta(minutes=turn_index)

    def tick(self) -> datetime.datetime:
        self._now += datetime.timedelta(milliseconds=1)
        return self._now


def turn_events(turn: harness.Turn, turn_index: int) -> Iterator[dict[str, Any]]:
    """The `completion` events of one turn: trace parts step by step, then the answer."""
    clock = _Clock(turn_index)

    def trace(orchestration: dict[str, Any]) -> dict[str, Any]:
        return {
            "trace": {
                "agentId": AGENT_ID,
                "agentAliasId": AGENT_ALIAS_ID,
                "agentVersion": "DRAFT",
                "sessionId": harness.CONVERSATION_ID,
                "eventTime": clock.tick(),
                "trace": {"orchestrationTrace": orchestration},
            }
        }

    for n, step in enumerate(turn.steps):
        trace_id = f"turn{turn_index}-step{n}"
        started = clock.tick()
        yield trace(
            {
                "modelInvocationInput": {
                    "traceId": trace_id,
                    "type": "ORCHESTRATION",
                    "foundationModel": FOUNDATION_MODEL,
                    "text": _prompt(turn, n),
                }
            }
        )
        yield trace(
            {
                "modelInvocationOutput": {
                    "traceId": trace_id,
                    "rawResponse": {"content": _raw_response(step, turn_index * 10 + n)},
                    "metadata": {
                        "startTime": started,
                        "endTime": clock.tick(),
                        "usage": {"inputTokens": 10, "outputTokens": 5},
                    },
                }
            }
        )
        for call in step.tool_calls:
            yield trace(
                {
                    "invocationInput": {
                        "traceId": trace_id,
                        "invocationType": "ACTION_GROUP",
                        "actionGroupInvocationInput": {
                            "actionGroupName": ACTION_GROUP,
                            "function": call.name,
                            "parameters": [_parameter(k, v) for k, v in call.arguments.items()],
                            "executionType": "LAMBDA",
                        },
                    }
                }
            )
            yield trace(
                {
                    "observation": {
                        "traceId": trace_id,
                        "type": "ACTION_GROUP",
                        "actionGroupInvocationOutput": {"text": _output_text(call)},
                    }
                }
            )
        if step.text is not None:
            yield trace(
                {
                    "observation": {
                        "traceId": trace_id,
                        "type": "FINISH",
                        "finalResponse": {"text": step.text},
                    }
                }
            )
    yield {"chunk": {"bytes": turn.answer.encode()}}


def stub_turns(client: Any, stubber: Any) -> None:
    """Queue one `invoke_agent` answer per turn; its stream replaces the validated stub's
    empty `completion` (Stubber cannot queue a stream: see `event_stream`)."""
    for index, turn in enumerate(harness.TURNS):
        response: dict[str, Any] = {
            "completion": {},
            "contentType": "application/json",
            "sessionId": harness.CONVERSATION_ID,
        }
        stubber.add_response(
            "invoke_agent",
            response,
            expected_params={
                "agentId": AGENT_ID,
                "agentAliasId": AGENT_ALIAS_ID,
                "sessionId": harness.CONVERSATION_ID,
                "inputText": turn.query,
                "enableTrace": True,
            },
        )
        response["completion"] = completion_stream(
            client, "InvokeAgent", list(turn_events(turn, index))
        )


def run_turns(client: Any) -> list[str | None]:
    """The application: one `invoke_agent` per turn, the answer read from the stream."""
    from openinference.instrumentation import using_session

    answers: list[str | None] = []
    with using_session(harness.CONVERSATION_ID):
        for turn in harness.TURNS:
            response = client.invoke_agent(
                agentId=AGENT_ID,
                agentAliasId=AGENT_ALIAS_ID,
                sessionId=harness.CONVERSATION_ID,
                inputText=turn.query,
                enableTrace=True,
            )
            answer = ""
            for event in response["completion"]:
                if "chunk" in event:
                    answer += event["chunk"]["bytes"].decode()
            answers.append(answer)
    return answers
