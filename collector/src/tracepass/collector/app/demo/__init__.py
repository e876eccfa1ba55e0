"""`tracepass demo`: a real collector and the example agent in one process."""

__all__: list[str] = []
