"""`tracepass probe`: replay references K times against an agent."""

__all__: list[str] = []
