"""Attribute and span names tracepass emits.

They are spelled out once here because the collector matches on them literally: a typo
would not fail loudly, it would silently turn every turn into an "other" span.
"""

from __future__ import annotations

from typing import Final

# OpenTelemetry GenAI semantic conventions.
OPERATION_NAME: Final = "gen_ai.operation.name"
AGENT_NAME: Final = "gen_ai.agent.name"
AGENT_VERSION: Final = "gen_ai.agent.version"
CONVERSATION_ID: Final = "gen_ai.conversation.id"
INPUT_MESSAGES: Final = "gen_ai.input.messages"
OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
TOOL_NAME: Final = "gen_ai.tool.name"
TOOL_TYPE: Final = "gen_ai.tool.type"
TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"
# tracepass's own: the JSON Schema of a `@tool` function's parameters (docs/instrumentation.md)
TOOL_PARAMETERS_SCHEMA: Final = "tracepass.tool.parameters_schema"
ERROR_TYPE: Final = "error.type"

OP_INVOKE_AGENT: Final = "invoke_agent"
OP_EXECUTE_TOOL: Final = "execute_tool"

# tracepass's own attributes.
REFERENCE_ID: Final = "tracepass.reference.id"
TRACEPASS_AGENT_VERSION: Final = "tracepass.agent.version"
CONTENT_TRUNCATED: Final = "tracepass.content.truncated"
CONVERSATION_END: Final = "tracepass.conversation.end"
CONVERSATION_TURNS: Final = "tracepass.conversation.turns"

# The end-of-conversation marker span is named like its flag attribute.
CONVERSATION_END_SPAN: Final = "tracepass.conversation.end"

INSTRUMENTATION_SCOPE: Final = "tracepass.instrumentation"
