"""The `tracepass` command: one module per command, registered in `main.py`."""

__all__: list[str] = []
