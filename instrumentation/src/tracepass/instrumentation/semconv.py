"""Attribute and span names tracepass emits and the collector reads: spelled once, here.

They are spelled out once because the collector matches on them literally: a typo
would not fail loudly, it would silently turn every turn into an "other" span. The OTel
GenAI names come from `opentelemetry-semantic-conventions` (its incubating GenAI
attributes), so they follow the published convention rather than a local copy. This
module is public: the collector (`tracepass.collector.normalize`) imports it.
"""

from __future__ import annotations

from typing import Final

from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as _ga
from opentelemetry.semconv.attributes import error_attributes as _err

# OpenTelemetry GenAI semantic conventions.
OPERATION_NAME: Final = _ga.GEN_AI_OPERATION_NAME
AGENT_NAME: Final = _ga.GEN_AI_AGENT_NAME
AGENT_VERSION: Final = _ga.GEN_AI_AGENT_VERSION
CONVERSATION_ID: Final = _ga.GEN_AI_CONVERSATION_ID
INPUT_MESSAGES: Final = _ga.GEN_AI_INPUT_MESSAGES
OUTPUT_MESSAGES: Final = _ga.GEN_AI_OUTPUT_MESSAGES
TOOL_NAME: Final = _ga.GEN_AI_TOOL_NAME
TOOL_TYPE: Final = _ga.GEN_AI_TOOL_TYPE
TOOL_CALL_ID: Final = _ga.GEN_AI_TOOL_CALL_ID
TOOL_CALL_ARGUMENTS: Final = _ga.GEN_AI_TOOL_CALL_ARGUMENTS
TOOL_CALL_RESULT: Final = _ga.GEN_AI_TOOL_CALL_RESULT
# tracepass's own: the JSON Schema of a `@tool` function's parameters (docs/instrumentation.md)
TOOL_PARAMETERS_SCHEMA: Final = "tracepass.tool.parameters_schema"
TOOL_DEFINITIONS: Final = _ga.GEN_AI_TOOL_DEFINITIONS
REQUEST_MODEL: Final = _ga.GEN_AI_REQUEST_MODEL
RESPONSE_MODEL: Final = _ga.GEN_AI_RESPONSE_MODEL
ERROR_TYPE: Final = _err.ERROR_TYPE

OP_INVOKE_AGENT: Final = _ga.GenAiOperationNameValues.INVOKE_AGENT.value
OP_EXECUTE_TOOL: Final = _ga.GenAiOperationNameValues.EXECUTE_TOOL.value
OP_CHAT: Final = _ga.GenAiOperationNameValues.CHAT.value
OP_TEXT_COMPLETION: Final = _ga.GenAiOperationNameValues.TEXT_COMPLETION.value
OP_GENERATE_CONTENT: Final = _ga.GenAiOperationNameValues.GENERATE_CONTENT.value
OP_INVOKE_WORKFLOW: Final = _ga.GenAiOperationNameValues.INVOKE_WORKFLOW.value

# GenAI events (span events or OTLP log records; not in the semconv package as
# constants): the deprecated per-message events and the current operation-details event.
EVENT_SYSTEM_MESSAGE: Final = "gen_ai.system.message"
EVENT_USER_MESSAGE: Final = "gen_ai.user.message"
EVENT_ASSISTANT_MESSAGE: Final = "gen_ai.assistant.message"
EVENT_TOOL_MESSAGE: Final = "gen_ai.tool.message"
EVENT_CHOICE: Final = "gen_ai.choice"
EVENT_OPERATION_DETAILS: Final = "gen_ai.client.inference.operation.details"

# tracepass's own attributes.
REFERENCE_ID: Final = "tracepass.reference.id"
TRACEPASS_AGENT_VERSION: Final = "tracepass.agent.version"
CONTENT_TRUNCATED: Final = "tracepass.content.truncated"
CONVERSATION_END: Final = "tracepass.conversation.end"
CONVERSATION_TURNS: Final = "tracepass.conversation.turns"

# The end-of-conversation marker span is named like its flag attribute.
CONVERSATION_END_SPAN: Final = "tracepass.conversation.end"

INSTRUMENTATION_SCOPE: Final = "tracepass.instrumentation"
