"""Self-contained HTML report of an evaluation (`tracepass evaluate --format html`)."""

from tracepass.collector.app.report.html import render_report

__all__ = ["render_report"]
