"""LangGraph.js corpus: the shared travel scenario under OpenInference's LangChain.js
instrumentation.

    python generate.py --list
    python generate.py langgraph_js_openinference

`scenario.mjs` runs LangGraph.js's `createReactAgent` (three `tool(fn, {schema: zod})`
tools; the failing `book_flight` throws and the ToolNode hands the model the error) twice
in one `MemorySaver` thread (`configurable.thread_id` = the conversation id, which
OpenInference records as `session.id`). The chat model is a `BaseChatModel` replaying the
script's steps (only the LLM is fake). Spans go over OTLP/HTTP JSON to a loopback
receiver (`node_support.py`). Packages: `package-lock.json` (`npm ci`).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import generator_support as support
import node_support

HERE = Path(__file__).resolve().parent
NOTES = [
    "model: a BaseChatModel subclass replaying the script's steps as AIMessages with "
    "tool_calls (bindTools returns the model itself)",
    "session: configurable.thread_id = CONVERSATION_ID (OpenInference reads session_id, "
    "thread_id or conversation_id from the run metadata)",
    "tools return JSON text for non-string results; the truth keeps the plain results",
]


def generate(scenario: str) -> Path:
    return node_support.generate_corpus(
        HERE,
        scenario,
        framework="@langchain/langgraph (LangGraph.js)",
        framework_package="@langchain/langgraph",
        instrumentation="@arizeai/openinference-instrumentation-langchain",
        instrumentation_package="@arizeai/openinference-instrumentation-langchain",
        settings={
            "instrumentation": "LangChainInstrumentation({tracerProvider})"
            ".manuallyInstrument(CallbackManagerModule)"
        },
        notes=NOTES,
    )


SCENARIOS = {"langgraph_js_openinference": generate}

if __name__ == "__main__":
    raise SystemExit(support.run_cli(SCENARIOS, __doc__))
