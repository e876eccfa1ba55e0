"""LangSmith's OpenTelemetry export (the `langsmith` SDK with `LANGSMITH_OTEL_ENABLED`):
one span per LangChain / LangGraph run, typed by `langsmith.span.kind`, content as JSON
blobs in `gen_ai.prompt` / `gen_ai.completion`.

| kind | record | fields |
|---|---|---|
| `chain` without `langsmith.metadata.langgraph_node` (the graph or chain invoked) | TURN | query: the last user message of the input state; answer: the last assistant message of the output state |
| `chain` of a subgraph named after the node that runs it (`checkpoint_ns` = `langgraph_checkpoint_ns`, `langsmith.trace.name` = `langgraph_node`: a swarm's or supervisor's agent) | TURN, nested (an agent step) | agent: the node |
| `chain` of a graph node (`langgraph_node` set), `prompt`, `parser`, … | OTHER | |
| `llm` | MODEL | by shape (`shape.py`): the last user message, the answer, the requested tool calls, tool results in the history |
| `tool` | TOOL | name: `gen_ai.tool.name`; call id: `gen_ai.tool.call.id`; arguments: the input; result: the ToolMessage's content (an MCP tool's structured content when there is one); error: the ToolMessage's `status: "error"` |

The conversation id is `langsmith.metadata.thread_id` (LangGraph's
`configurable.thread_id`), else `langsmith.metadata.session_id` /
`conversation_id`. Claimed by the attribute `langsmith.span.kind`, before the GenAI
conventions (these spans also carry `gen_ai.operation.name`: `chain`, `chat`,
`execute_tool`).
"""

from __future__ import annotations

from typing import Any, Final

from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tracepass.collector.normalize.extract import as_str, first_str
from tracepass.collector.normalize.messages import answer_from_state, query_from_state
from tracepass.collector.normalize.registry import TOOL_RESPONSES_ATTR, Convention
from tracepass.collector.normalize.shape import read_values
from tracepass.collector.records import (
    RecordKind,
    SpanRecord,
    coerce_result,
    deferred_arguments,
    store_tool_arguments,
)

NAME: Final = "langsmith"
KIND: Final = "langsmith.span.kind"
PROMPT: Final = "gen_ai.prompt"
COMPLETION: Final = "gen_ai.completion"
GRAPH_NODE: Final = "langsmith.metadata.langgraph_node"
CHECKPOINT_NS: Final = "langsmith.metadata.checkpoint_ns"
RUN_NAME: Final = "langsmith.trace.name"
NODE_NS: Final = "langsmith.metadata.langgraph_checkpoint_ns"
CONVERSATION_KEYS: Final = (
    "langsmith.metadata.thread_id",
    "langsmith.metadata.session_id",
    "langsmith.metadata.conversation_id",
)


def _subgraph_run(attrs: dict[str, Any]) -> bool:
    """A compiled subgraph's own run: the checkpoint namespace it was given is its node's
    (a node's inner runs have the node's namespace below the subgraph's, `…|node:…`)."""
    given = attrs.get(CHECKPOINT_NS)
    return given is not None and given == attrs.get(NODE_NS)


def _fill(rec: SpanRecord, attrs: dict[str, Any], kind: Any, span: Span) -> str | None:
    get = attrs.get
    if rec.conversation_id is None:
        rec.conversation_id = first_str(attrs, CONVERSATION_KEYS)
    if kind == "chain":
        node = get(GRAPH_NODE)
        if node is None:
            rec.kind = RecordKind.TURN
            rec.input_text = query_from_state(get(PROMPT))
            rec.output_text = answer_from_state(get(COMPLETION))
        elif node == get(RUN_NAME) and _subgraph_run(attrs):
            # A subgraph run named after the node that runs it (a swarm's or
            # supervisor's agent): an agent span, nested in the turn.
            rec.kind = RecordKind.TURN
            rec.agent_name = as_str(node)
            rec.input_text = query_from_state(get(PROMPT))
            rec.output_text = answer_from_state(get(COMPLETION))
    elif kind == "llm":
        rec.kind = RecordKind.MODEL
        reading = read_values(((PROMPT, get(PROMPT)), (COMPLETION, get(COMPLETION))))
        rec.input_text = reading.query
        rec.output_text = reading.answer
        rec.requested_tool_calls = reading.tool_calls
        if reading.tool_results:
            rec.attributes[TOOL_RESPONSES_ATTR] = reading.tool_results
    elif kind == "tool":
        rec.kind = RecordKind.TOOL
        rec.tool_name = as_str(get("gen_ai.tool.name")) or rec.name
        rec.tool_call_id = as_str(get("gen_ai.tool.call.id"))
        store_tool_arguments(rec, deferred_arguments(get(PROMPT)))
        completion = get(COMPLETION)
        reading = read_values(((COMPLETION, completion),))
        if reading.own_result is not None:
            rec.tool_result, error = reading.own_result
            if rec.error is None and error is not None:
                rec.error = error
        else:
            rec.tool_result = coerce_result(completion)
    return NAME


CONVENTIONS = (
    Convention(
        NAME,
        keys=(KIND,),
        fill=_fill,
        doc="LangSmith's OTel export (`langsmith.span.kind`): the invoked chain/graph → "
        "TURN, llm → MODEL, tool → TOOL; content in gen_ai.prompt / gen_ai.completion",
    ),
)
