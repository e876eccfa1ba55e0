"""Pure scoring and statistics for tool-using agents (no network, no OTLP)."""
