"""Real OpenTelemetry SDK wiring for instrumentation tests.

The global tracer provider can be set only once per process, so one SDK provider with an
in-memory exporter serves the whole worker; each test gets the exporter cleared and the
content settings restored.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tracepass.instrumentation import _content, install

_EXPORTER = InMemorySpanExporter()
_PROVIDER: TracerProvider | None = None


def _provider() -> TracerProvider:
    global _PROVIDER
    if _PROVIDER is None:
        current = trace.get_tracer_provider()
        if isinstance(current, TracerProvider):
            provider = current
        else:
            provider = TracerProvider()
            trace.set_tracer_provider(provider)
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        install(provider)
        _PROVIDER = provider
    return _PROVIDER


@pytest.fixture
def provider() -> TracerProvider:
    return _provider()


@pytest.fixture
def spans(provider: TracerProvider) -> Iterator[InMemorySpanExporter]:
    """The exporter; call `.get_finished_spans()` after the code under test ran."""
    saved = _content.get_settings()
    _EXPORTER.clear()
    yield _EXPORTER
    _content.set_settings(saved)
    _EXPORTER.clear()
