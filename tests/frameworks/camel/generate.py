"""CAMEL corpus: the shared travel scenario as a CAMEL `ChatAgent` with the three tools,
traced by OpenInference's OpenAI instrumentation (CAMEL's OpenAI-compatible model backend
calls the `openai` client).

    python generate.py --list
    python generate.py camel_openinference_openai

Why this instrumentation: CAMEL's own tracing hooks do not export OpenTelemetry with
current SDKs (see README.md: its Langfuse hook imports the Langfuse v2 decorators API,
which the OTel-based Langfuse 3+ removed, its TraceRoot hook imports a `trace` that
TraceRoot 0.5 no longer has, and AgentOps exports only to AgentOps' own backend); a CAMEL
user who wants OTLP instruments the model client CAMEL uses.

The model is `ModelPlatformType.OPENAI_COMPATIBLE_MODEL` pointed at a loopback HTTP server
that answers each chat-completions request with the script's next step (only the LLM is
fake; the `openai` client, CAMEL's request building and tool loop are real). Tools are
CAMEL `FunctionTool`s over the harness functions; the failing call's exception is handed
to the model by CAMEL as text. One `agent.step(query)` per turn (CAMEL's memory carries
the history) inside `using_session(CONVERSATION_ID)` and an application span per turn.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import generator_support as support
import harness

FRAMEWORK = "camel-ai"
TURN_SPAN = f"{harness.AGENT_NAME} turn"


class _ScriptedModel(ThreadingHTTPServer):
    steps: Iterator[tuple[int, harness.Step]]
    problems: list[str]


class _Handler(BaseHTTPRequestHandler):
    server: _ScriptedModel

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if not self.path.endswith("/chat/completions"):
            self.server.problems.append(f"unscripted POST {self.path}")
            self._reply(404, {"error": {"message": f"unscripted {self.path}"}})
            return
        index, step = next(self.server.steps)
        self._reply(200, support.chat_completion_body(step, index, support.MODEL_NAME))

    def _reply(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _model_server() -> _ScriptedModel:
    server = _ScriptedModel(("127.0.0.1", 0), _Handler)
    server.steps = enumerate(harness.model_steps())
    server.problems = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _byte_token_counter() -> Any:
    """A token counter that needs no download: CAMEL's default for OpenAI-compatible
    models is tiktoken's, which fetches its encoding from the network on first use."""
    from camel.utils.token_counting import BaseTokenCounter

    class ByteTokenCounter(BaseTokenCounter):
        def count_tokens_from_messages(self, messages: list[Any]) -> int:
            return sum(len(json.dumps(m, default=str).encode()) for m in messages) // 4

        def encode(self, text: str) -> list[int]:
            return list(text.encode())

        def decode(self, token_ids: list[int]) -> str:
            return bytes(token_ids).decode(errors="replace")

    return ByteTokenCounter()


def generate(scenario: str) -> Path:
    from camel.agents import ChatAgent
    from camel.models import ModelFactory
    from camel.toolkits import FunctionTool
    from camel.types import ModelPlatformType
    from openinference.instrumentation import using_session
    from openinference.instrumentation.openai import OpenAIInstrumentor
    from opentelemetry import trace

    install = support.installer(OpenAIInstrumentor)
    capture = harness.Capture()
    instrumentor = install(capture)
    server = _model_server()
    try:
        model = ModelFactory.create(
            model_platform=ModelPlatformType.OPENAI_COMPATIBLE_MODEL,
            model_type=support.MODEL_NAME,
            url=f"http://127.0.0.1:{server.server_address[1]}/v1",
            api_key="offline",
            token_counter=_byte_token_counter(),
        )
        agent = ChatAgent(
            system_message=harness.SYSTEM_PROMPT,
            model=model,
            tools=[FunctionTool(fn) for fn in harness.TOOLS.values()],
        )
        tracer = trace.get_tracer("travel-agent-app")
        answers: list[str | None] = []
        with using_session(harness.CONVERSATION_ID):
            for turn in harness.TURNS:
                with tracer.start_as_current_span(TURN_SPAN):
                    response = agent.step(turn.query)
                answers.append(response.msgs[-1].content if response.msgs else None)
    finally:
        server.shutdown()
        instrumentor.uninstrument()
    if server.problems:
        raise SystemExit(f"{scenario}: {server.problems}")
    support.check_answers(scenario, answers)
    meta = support.meta(
        FRAMEWORK,
        "openinference-instrumentation-openai",
        framework_package="camel-ai",
        settings={
            "using_session": harness.CONVERSATION_ID,
            "model_platform": "OPENAI_COMPATIBLE_MODEL",
        },
        agent_name=None,
        notes=[
            "CAMEL ChatAgent with FunctionTools; model: OPENAI_COMPATIBLE_MODEL on a loopback "
            "server answering chat completions with the script's steps.",
            "CAMEL's own tracing hooks (Langfuse v2 decorators, TraceRoot, AgentOps) export no "
            "OTLP with current SDKs; the OpenAI client is instrumented instead.",
            f"The application wraps each turn in a plain span {TURN_SPAN!r}; tools are not "
            "traced, so calls are seen as the model's tool_calls and the next request's tool "
            "messages.",
        ],
    )
    return capture.write(scenario, meta)


SCENARIOS = {"camel_openinference_openai": generate}

if __name__ == "__main__":
    raise SystemExit(support.run_cli(SCENARIOS, __doc__))
