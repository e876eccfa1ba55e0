"""Former private name of `tracepass.instrumentation.semconv`, kept as a re-export."""

from tracepass.instrumentation.semconv import *  # noqa: F403
