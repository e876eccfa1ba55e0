"""Scoring and statistics for tool-using agents (no network, no OTLP), plus offline
evaluation (`offline/`). Import public names from the modules' `__all__`."""

__all__: list[str] = []
