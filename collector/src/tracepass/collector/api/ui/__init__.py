"""The read-only web UI served by `tracepass serve` at /ui/ (`pages.py`)."""

from tracepass.collector.api.ui.pages import UI_PREFIX, ui_routes

__all__ = ["UI_PREFIX", "ui_routes"]
