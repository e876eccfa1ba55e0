"""Grafana agento11y corpus: the shared travel scenario, a LangGraph ReAct agent recorded by
agento11y's LangGraph callback handler in its three capture setups.

    python generate.py --list
    python generate.py agento11y_langgraph [agento11y_langgraph_full agento11y_langgraph_otel]

The agent is the LangGraph corpus's `create_react_agent` (same scripted chat model, same
tools, loaded from `../langgraph/generate.py`), run twice in one thread with
`Agento11yLangGraphHandler(client=..., agent_name=..., conversation_id=...)` as the
callback; the `agento11y.Client` gets the harness's tracer provider. Generations that
agento11y sends to Grafana's own ingest (its default `grpc` protocol) go to the SDK's
`NoopGenerationExporter` (no network); with `protocol="otel"` they are OTel spans.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import generator_support as support
import harness

FRAMEWORK = "agento11y"
OTEL_SWITCH = "AGENTO11Y_ENABLE_EXPERIMENTAL_FEATURES"
NOTES = [
    "every span is the root of its own trace; runs are linked by "
    "agento11y.framework.run_id / parent_run_id (tool spans carry none)",
    "grpc/http protocol: messages go to the generation ingest, not to spans: no span carries "
    "the query, the answer or the model's tool-call requests; the failing tool's span "
    "carries no arguments",
]


def _langgraph_generator() -> Any:
    path = Path(__file__).resolve().parent.parent / "langgraph" / "generate.py"
    spec = importlib.util.spec_from_file_location("langgraph_corpus_generator", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _client(capture: harness.Capture, mode: str) -> Any:
    from agento11y import Client
    from agento11y.config import ClientConfig, GenerationExportConfig
    from agento11y.exporters.noop import NoopGenerationExporter
    from agento11y.models import ContentCaptureMode

    if mode == "otel":
        # `protocol="otel"` is an experimental feature of the SDK, switched on by env.
        os.environ[OTEL_SWITCH] = "true"
        return Client(
            ClientConfig(
                generation_export=GenerationExportConfig(protocol="otel"),
                tracer_provider=capture.tracer_provider,
                meter_provider=None,
                content_capture=ContentCaptureMode.FULL,
            )
        )
    return Client(
        ClientConfig(
            tracer_provider=capture.tracer_provider,
            generation_exporter=NoopGenerationExporter(),
            content_capture=ContentCaptureMode.FULL if mode == "full" else None,
        )
    )


def generate(scenario: str) -> Path:
    from agento11y_langgraph import Agento11yLangGraphHandler

    mode = {"agento11y_langgraph": "default", "agento11y_langgraph_full": "full"}.get(
        scenario, "otel"
    )
    langgraph = _langgraph_generator()
    capture = harness.Capture()
    client = _client(capture, mode)
    handler = Agento11yLangGraphHandler(
        client=client,
        agent_name=harness.AGENT_NAME,
        conversation_id=harness.CONVERSATION_ID,
    )
    agent = langgraph.REACT.build()
    config = {"configurable": {"thread_id": harness.CONVERSATION_ID}, "callbacks": [handler]}
    answers = [
        agent.invoke({"messages": [("user", turn.query)]}, config=config)["messages"][-1].content
        for turn in harness.TURNS
    ]
    client.shutdown()
    support.check_answers(scenario, answers)
    settings = {
        "default": {"protocol": "grpc (default; generations to NoopGenerationExporter)"},
        "full": {
            "protocol": "grpc (default; generations to NoopGenerationExporter)",
            "content_capture": "ContentCaptureMode.FULL",
        },
        "otel": {
            "protocol": "otel",
            "content_capture": "ContentCaptureMode.FULL",
            OTEL_SWITCH: "true",
        },
    }[mode]
    meta = support.meta(
        FRAMEWORK,
        "agento11y-langgraph",
        framework_package="agento11y",
        settings=settings,
        notes=NOTES if mode != "otel" else NOTES[:1],
    )
    return capture.write(scenario, meta)


SCENARIOS = {
    "agento11y_langgraph": generate,
    "agento11y_langgraph_full": generate,
    "agento11y_langgraph_otel": generate,
}

if __name__ == "__main__":
    raise SystemExit(support.run_cli(SCENARIOS, __doc__))
