"""Decorators that emit OpenTelemetry GenAI spans for agent turns and tool calls."""
