"""OTLP collector: receive spans, rebuild conversations, score them, export metrics.

One package per stage (CONTRIBUTING.md); import public names from the stage packages."""

__all__: list[str] = []
