"""The `[report]` extra (matplotlib) that HTML reports need, and the one line that says
how to install it. Its own module, free of heavy imports, so a command can check for
the extra before any work and the demo can name the same command."""

from __future__ import annotations

__all__ = ["REPORT_EXTRA_INSTALL", "missing_report_extra"]

REPORT_EXTRA_INSTALL = "pip install 'tracepass-collector[report]'"


def missing_report_extra(what: str) -> str | None:
    """None when the HTML report renderer imports; else the line to print: what needs
    it, the module that is missing and the install command."""
    try:
        import tracepass.collector.app.report  # noqa: F401
    except ImportError as exc:
        missing = getattr(exc, "name", None) or str(exc)
        return f"{what} needs the report extra ({missing} is not installed): {REPORT_EXTRA_INSTALL}"
    return None
