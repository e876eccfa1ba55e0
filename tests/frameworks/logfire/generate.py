"""Pydantic Logfire corpus: the OpenAI Agents SDK under `logfire.instrument_openai_agents()`
and the OpenAI SDK under `logfire.instrument_openai()`, exported over real OTLP/HTTP.

    python generate.py --list
    python generate.py logfire_openai_agents [logfire_openai_agents_handoff ...]

Logfire is configured as a user keeps it off its cloud: `logfire.configure(
send_to_logfire=False, additional_span_processors=[BatchSpanProcessor(
OTLPSpanExporter(endpoint=loopback))])`, with its default scrubbing on except where a
scenario says `scrubbing=False`. The receiver is `otlp_sink.py` (protobuf bodies).

* `logfire_openai_agents`: the agent, tools and session of `openai_agents/generate.py`
  (its scripted `agents.Model`, only the LLM is fake), default scrubbing.
* `logfire_openai_agents_handoff`: the two-agent hand-off run of the same module
  (the triage agent's `transfer_to_booking_agent` call), scrubbing off.
* `logfire_openai_chat`: no agent framework: a hand-rolled chat-completions loop on a
  real `openai.OpenAI` client whose HTTP transport answers with the script
  (`generator_support.chat_completions_transport`), each turn in a `logfire.span`
  carrying `session.id`; tools are not traced (calls are seen as the model's requests
  and the next request's tool messages).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import generator_support as support
import harness
import otlp_sink

HERE = Path(__file__).resolve().parent
FRAMEWORK = "openai-agents"


def _openai_agents_generator() -> Any:
    """`openai_agents/generate.py` (scripted model, agents, hand-off), loaded as a module."""
    path = HERE.parent / "openai_agents" / "generate.py"
    spec = importlib.util.spec_from_file_location("openai_agents_generate", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _configure(sink: otlp_sink.OtlpSink, *, scrubbing: bool) -> Any:
    import logfire
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    logfire.configure(
        send_to_logfire=False,
        service_name=harness.SERVICE_NAME,
        console=False,
        additional_span_processors=[BatchSpanProcessor(OTLPSpanExporter(endpoint=sink.endpoint))],
        **({} if scrubbing else {"scrubbing": False}),
    )
    return logfire


def _settings(scrubbing: bool, instrument: str) -> dict[str, str]:
    return {
        "logfire.configure": "send_to_logfire=False, console=False, "
        "additional_span_processors=[BatchSpanProcessor(OTLPSpanExporter(loopback))]"
        + ("" if scrubbing else ", scrubbing=False"),
        "scrubbing": "default (on)" if scrubbing else "off",
        "instrumentation": instrument,
    }


def agents_scenario(*, handoff: bool, scrubbing: bool) -> support.Generator:
    def generate(scenario: str) -> Path:
        oa = _openai_agents_generator()
        with otlp_sink.OtlpSink() as sink:
            logfire = _configure(sink, scrubbing=scrubbing)
            from agents import set_trace_processors

            set_trace_processors([])  # no upload to OpenAI
            logfire.instrument_openai_agents()
            if handoff:
                model = oa.scripted_model(oa.handoff_steps())
                answers = asyncio.run(oa.run_turns(model, _null, oa.build_handoff_agent))
            else:
                answers = asyncio.run(oa.run_turns(oa.scripted_model(), _null))
            logfire.force_flush()
            logfire.shutdown()
            requests = sink.requests(scenario)
        support.check_answers(scenario, answers)
        meta = support.meta(
            FRAMEWORK,
            "logfire (instrument_openai_agents)",
            instrumentation_package="logfire",
            settings=_settings(scrubbing, "logfire.instrument_openai_agents()"),
            notes=[
                *oa.COMMON_NOTES,
                oa.CUSTOM_MODEL_NOTE,
                "Logfire records the SDK's traces as its own spans: attributes gen_ai.*, "
                "raw_input, response, input, output, group_id (the conversation id "
                "RunConfig.group_id carries)",
            ],
        )
        path = Path(otlp_sink.write_corpus(scenario, requests, meta))
        if handoff:
            expected = path.with_name(f"{scenario}.expected.json")
            truth = oa.handoff_truth(json.loads(expected.read_text()))
            expected.write_text(json.dumps(truth, indent=2) + "\n")
        return path

    return generate


def _litellm_generator() -> Any:
    """`litellm/generate.py` (the OpenAI tool specs and the tool loop's `run_call`)."""
    path = HERE.parent / "litellm" / "generate.py"
    spec = importlib.util.spec_from_file_location("litellm_generate", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


TURN_SPAN = f"{harness.AGENT_NAME} turn"


def chat_scenario(scenario: str) -> Path:
    """A hand-rolled tool loop on `openai.OpenAI` under `logfire.instrument_openai()`, each
    turn a `logfire.span` carrying `session.id` (which default scrubbing hides)."""
    import httpx2 as httpx  # openai 3.x runs on httpx2

    loop = _litellm_generator()
    steps = enumerate(harness.model_steps())

    def respond(request: httpx.Request) -> httpx.Response:
        if request.method != "POST" or not request.url.path.endswith("/chat/completions"):
            return httpx.Response(404, json={"error": {"message": f"unscripted {request.url}"}})
        index, step = next(steps)
        body = support.chat_completion_body(step, index, support.MODEL_NAME)
        return httpx.Response(200, json=body)

    with otlp_sink.OtlpSink() as sink:
        logfire = _configure(sink, scrubbing=True)
        from openai import OpenAI

        client = OpenAI(
            api_key="offline",
            base_url="http://scripted-llm.invalid/v1",
            max_retries=0,
            http_client=httpx.Client(transport=httpx.MockTransport(respond)),
        )
        logfire.instrument_openai(client)
        messages: list[dict[str, Any]] = [{"role": "system", "content": harness.SYSTEM_PROMPT}]
        answers: list[str | None] = []
        for turn in harness.TURNS:
            with logfire.span(TURN_SPAN, **{"session.id": harness.CONVERSATION_ID}):
                messages.append({"role": "user", "content": turn.query})
                while True:
                    reply = (
                        client.chat.completions.create(
                            model=support.MODEL_NAME, messages=messages, tools=loop.TOOL_SPECS
                        )
                        .choices[0]
                        .message
                    )
                    messages.append(reply.model_dump(exclude_none=True))
                    if not reply.tool_calls:
                        answers.append(reply.content)
                        break
                    for call in reply.tool_calls:
                        content = loop.run_call(call.function.name, call.function.arguments)
                        messages.append(
                            {"role": "tool", "tool_call_id": call.id, "content": content}
                        )
        logfire.force_flush()
        logfire.shutdown()
        requests = sink.requests(scenario)
    support.check_answers(scenario, answers)
    meta = support.meta(
        "openai",
        "logfire (instrument_openai)",
        instrumentation_package="logfire",
        settings={
            **_settings(True, "logfire.instrument_openai(client)"),
            "turn span": f"logfire.span({TURN_SPAN!r}, session.id=CONVERSATION_ID)",
        },
        notes=[
            "No agent framework: a hand-rolled chat-completions tool loop on a real "
            "openai.OpenAI client whose HTTP transport answers with the script",
            "default scrubbing hides the turn span's session.id ('session' is one of its "
            "patterns) and lists it in logfire.scrubbed: no span carries the conversation "
            "id, so each turn is its own trace-only conversation",
            "tools are not traced: calls are seen as the model's requests and the next "
            'request\'s tool messages; a tool error goes to the model as {"error": message}',
        ],
        **support.per_turn_conversations(),
    )
    return Path(otlp_sink.write_corpus(scenario, requests, meta))


def _anthropic_message(step: harness.Step, index: int) -> dict[str, Any]:
    """A script step as the Anthropic Messages API answers it (text or `tool_use` blocks)."""
    content: list[dict[str, Any]] = [
        {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
        for call in step.tool_calls
    ]
    if step.text is not None:
        content.append({"type": "text", "text": step.text})
    return {
        "id": f"msg_scripted_{index}",
        "type": "message",
        "role": "assistant",
        "model": support.MODEL_NAME,
        "content": content,
        "stop_reason": "tool_use" if step.tool_calls else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 0, "output_tokens": 0},
    }


def anthropic_scenario(scenario: str) -> Path:
    """A hand-rolled tool loop on `anthropic.Anthropic` under `logfire.instrument_anthropic()`;
    a failing tool goes back as a `tool_result` block with `is_error: true`."""
    import httpx2 as httpx  # anthropic 2.x runs on httpx2

    loop = _litellm_generator()
    steps = enumerate(harness.model_steps())
    tools = [
        {
            "name": spec["function"]["name"],
            "description": spec["function"]["description"],
            "input_schema": spec["function"]["parameters"],
        }
        for spec in loop.TOOL_SPECS
    ]

    def respond(request: httpx.Request) -> httpx.Response:
        if request.method != "POST" or not request.url.path.endswith("/messages"):
            return httpx.Response(404, json={"error": {"message": f"unscripted {request.url}"}})
        index, step = next(steps)
        return httpx.Response(200, json=_anthropic_message(step, index))

    with otlp_sink.OtlpSink() as sink:
        logfire = _configure(sink, scrubbing=False)
        from anthropic import Anthropic

        client = Anthropic(
            api_key="offline",
            base_url="http://scripted-llm.invalid",
            max_retries=0,
            http_client=httpx.Client(transport=httpx.MockTransport(respond)),
        )
        logfire.instrument_anthropic(client)
        messages: list[dict[str, Any]] = []
        answers: list[str | None] = []
        for turn in harness.TURNS:
            with logfire.span(TURN_SPAN, **{"gen_ai.conversation.id": harness.CONVERSATION_ID}):
                messages.append({"role": "user", "content": turn.query})
                while True:
                    reply = client.messages.create(
                        model=support.MODEL_NAME,
                        max_tokens=512,
                        system=harness.SYSTEM_PROMPT,
                        messages=messages,
                        tools=tools,
                    )
                    messages.append(
                        {"role": "assistant", "content": [b.model_dump() for b in reply.content]}
                    )
                    uses = [b for b in reply.content if b.type == "tool_use"]
                    if not uses:
                        answers.append("".join(b.text for b in reply.content if b.type == "text"))
                        break
                    results = []
                    for use in uses:
                        try:
                            value = harness.TOOLS[use.name](**use.input)
                            text = value if isinstance(value, str) else json.dumps(value)
                            results.append(
                                {"type": "tool_result", "tool_use_id": use.id, "content": text}
                            )
                        except harness.ToolFailure as exc:
                            results.append(
                                {
                                    "type": "tool_result",
                                    "tool_use_id": use.id,
                                    "content": str(exc),
                                    "is_error": True,
                                }
                            )
                    messages.append({"role": "user", "content": results})
        logfire.force_flush()
        logfire.shutdown()
        requests = sink.requests(scenario)
    support.check_answers(scenario, answers)
    meta = support.meta(
        "anthropic",
        "logfire (instrument_anthropic)",
        instrumentation_package="logfire",
        settings={
            **_settings(False, "logfire.instrument_anthropic(client)"),
            "turn span": f"logfire.span({TURN_SPAN!r}, gen_ai.conversation.id=CONVERSATION_ID)",
        },
        notes=[
            "No agent framework: a hand-rolled Messages API tool loop on a real "
            "anthropic.Anthropic client whose HTTP transport answers with the script",
            "tools are not traced: calls are the model's tool_use blocks; results and the "
            "failure (a tool_result block with is_error: true, its only record) come from "
            "the next request's messages",
        ],
    )
    return Path(otlp_sink.write_corpus(scenario, requests, meta))


class _null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *args: object) -> None:
        return None


SCENARIOS: dict[str, support.Generator] = {
    "logfire_openai_agents": agents_scenario(handoff=False, scrubbing=True),
    "logfire_openai_agents_handoff": agents_scenario(handoff=True, scrubbing=False),
    "logfire_openai_chat": chat_scenario,
    "logfire_anthropic": anthropic_scenario,
}

if __name__ == "__main__":
    raise SystemExit(support.run_cli(SCENARIOS, __doc__))
