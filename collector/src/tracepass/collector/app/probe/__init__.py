"""`tracepass probe`: replay references K times against an agent."""
