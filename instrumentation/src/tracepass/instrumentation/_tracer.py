"""The tracer tracepass spans come from, cached per global provider.

`trace.get_tracer` builds a new Tracer (and scope object) on every call in the SDK, which
is too slow for the decorator hot path; looking the provider up each call still lets a
provider that is installed after decoration (the usual `configure` order) take effect.
"""

from __future__ import annotations

import functools

from opentelemetry import trace

from tracepass.instrumentation.semconv import INSTRUMENTATION_SCOPE


@functools.cache
def _version() -> str | None:
    """Looked up on first use, not at import: importlib.metadata costs tens of
    milliseconds to import, a price `import tracepass.instrumentation` should not pay."""
    from importlib import metadata

    try:
        return metadata.version("tracepass-instrumentation")
    except metadata.PackageNotFoundError:  # running from a source tree
        return None


_cached_provider: trace.TracerProvider | None = None
_cached_tracer: trace.Tracer | None = None


def get_tracer() -> trace.Tracer:
    global _cached_provider, _cached_tracer
    provider = trace.get_tracer_provider()
    tracer = _cached_tracer
    if provider is not _cached_provider or tracer is None:
        tracer = provider.get_tracer(INSTRUMENTATION_SCOPE, _version())
        _cached_provider, _cached_tracer = provider, tracer
    return tracer
