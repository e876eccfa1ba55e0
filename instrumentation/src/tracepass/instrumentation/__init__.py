"""Decorators that emit OpenTelemetry GenAI spans for agent turns and tool calls.

    from tracepass.instrumentation import agent, tool, conversation, configure

See docs/instrumentation.md for every span and attribute emitted.
"""

from tracepass.instrumentation._configure import configure, force_flush, shutdown
from tracepass.instrumentation._content import ContentSettings, Redactor, get_settings
from tracepass.instrumentation._context import (
    ConversationSpanProcessor,
    conversation,
    current_conversation_id,
    current_reference_id,
    install,
)
from tracepass.instrumentation._decorators import agent, tool

__all__ = [
    "ContentSettings",
    "ConversationSpanProcessor",
    "Redactor",
    "agent",
    "configure",
    "conversation",
    "current_conversation_id",
    "current_reference_id",
    "force_flush",
    "get_settings",
    "install",
    "shutdown",
    "tool",
]
