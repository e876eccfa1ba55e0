"""`configure`: one call that gets tracepass spans out of the process.

It must be safe in applications that already set up OpenTelemetry: there it never creates
a second provider (spans would silently split between two pipelines) and adds an exporter
only when the caller explicitly asks for one, since the app's pipeline presumably exports
already and the standard OTEL_EXPORTER_OTLP_* variables would point both at one place.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
)

from tracepass.instrumentation import _content
from tracepass.instrumentation._bounded import (
    BoundedExporter,
    bounded_shutdown,
    exporter_timeout_s,
    resolve_shutdown_timeout,
)
from tracepass.instrumentation._context import install
from tracepass.instrumentation._record import RECORD_FILE_ENV, RecordingSpanExporter

_log = logging.getLogger("tracepass.instrumentation")

Protocol = Literal["http/protobuf", "grpc"]
_PROTOCOLS: tuple[str, ...] = ("http/protobuf", "grpc")


@dataclass
class _State:
    provider: TracerProvider | None = None
    owns_provider: bool = False
    exporter_key: tuple[Any, ...] | None = None
    processors: list[SpanProcessor] = field(default_factory=list)
    exporters: list[BoundedExporter] = field(default_factory=list)
    shutdown_timeout_s: float | None = None
    exit_hook: bool = False
    # shutdown() ran on the provider configure created (the exit hook then does nothing).
    stopped: bool = False


_state = _State()
_lock = threading.Lock()


def _resolve_protocol(protocol: str | None) -> str:
    chosen = (
        protocol
        or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    )
    if chosen not in _PROTOCOLS:
        raise ValueError(
            f"unsupported OTLP protocol {chosen!r} (from "
            f"{'protocol=' if protocol else 'OTEL_EXPORTER_OTLP_*PROTOCOL'}); "
            f"expected one of {', '.join(_PROTOCOLS)}"
        )
    return chosen


def _http_traces_url(endpoint: str) -> str:
    """Accept a collector base URL as well as a full traces URL."""
    parts = urlsplit(endpoint)
    if parts.path in ("", "/"):
        return endpoint.rstrip("/") + "/v1/traces"
    return endpoint


_EXTRA_FOR_PROTOCOL = {"grpc": "otlp-grpc", "http/protobuf": "otlp-http"}


def _missing_exporter(protocol: str) -> ImportError:
    extra = _EXTRA_FOR_PROTOCOL[protocol]
    return ImportError(
        f"the OTLP {protocol} exporter is not installed: "
        f"pip install 'tracepass-instrumentation[{extra}]' (or [otlp] for both protocols), "
        "or pass exporter=... / record_to=..."
    )


def _otlp_exporter_class(protocol: str) -> Any:
    """The OTLP span exporter class for `protocol`, or an ImportError naming the extra."""
    try:
        if protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
                OTLPSpanExporter as GrpcExporter,
            )

            return GrpcExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
            OTLPSpanExporter as HttpExporter,
        )

        return HttpExporter
    except ImportError as exc:
        raise _missing_exporter(protocol) from exc


def _otlp_target(protocol: str, endpoint: str | None) -> str:
    """Where the OTLP exporter sends, for messages (the exporter resolves it itself)."""
    return (
        endpoint
        or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        or ("localhost:4317" if protocol == "grpc" else "localhost:4318")
    )


def _otlp_exporter(
    protocol: str, endpoint: str | None, headers: Mapping[str, str] | None, budget_s: float
) -> BoundedExporter:
    # endpoint/headers None: the exporters read OTEL_EXPORTER_OTLP_* themselves.
    hdrs = dict(headers) if headers is not None else None
    exporter_class = _otlp_exporter_class(protocol)
    options: dict[str, Any] = {"headers": hdrs}
    timeout = exporter_timeout_s(budget_s)
    if timeout is not None:
        options["timeout"] = timeout  # one batch, retries included
    if protocol == "grpc":
        exporter: SpanExporter = exporter_class(endpoint=endpoint, **options)
    else:
        url = _http_traces_url(endpoint) if endpoint is not None else None
        exporter = exporter_class(endpoint=url, **options)
    return BoundedExporter(exporter, _otlp_target(protocol, endpoint))


def _exporter_disabled() -> bool:
    """The standard switch OTEL_TRACES_EXPORTER=none: no OTLP export, even to an
    explicit `configure(endpoint=…)` (an `exporter=` object is code, and is kept)."""
    return os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none"


def configure(
    service_name: str | None = None,
    *,
    endpoint: str | None = None,
    protocol: Protocol | None = None,
    headers: Mapping[str, str] | None = None,
    capture_content: bool = True,
    redact: _content.Redactor | None = None,
    max_value_bytes: int = _content.DEFAULT_MAX_VALUE_BYTES,
    exporter: SpanExporter | None = None,
    batch: bool = True,
    record_to: str | os.PathLike[str] | None = None,
    shutdown_timeout_s: float | None = None,
) -> TracerProvider:
    """Set up tracing for tracepass and return the SDK TracerProvider in use.

    - No SDK provider set globally: create one (resource `service.name`), add the
      conversation processor and an exporter (`exporter`, else OTLP via `protocol`,
      default from OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL, else http/protobuf), set it global.
    - An SDK provider already set: only add the conversation processor, plus an exporter
      if `endpoint` or `exporter` is given explicitly.
    - Repeated calls update content settings; exporters are added at most once.

    `record_to` (or the TRACEPASS_RECORD_FILE environment variable) also appends every
    span to that file as OTLP/JSON lines, the input `tracepass evaluate` reads, in
    addition to the usual export; with OTEL_TRACES_EXPORTER=none (and no `endpoint` or
    `exporter`) spans go to the file only. The file is flushed per batch and on
    `shutdown()`.

    Content capture is on unless `capture_content=False` or
    OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=false.

    `shutdown()` (and the exit hook) take at most `shutdown_timeout_s` (else
    TRACEPASS_SHUTDOWN_TIMEOUT_S, else 5 s), also with the collector down: short jobs
    and serverless functions do not wait on it; what is not exported by then is
    dropped with one warning line.
    """
    # Validate everything before changing any state.
    chosen_protocol = _resolve_protocol(protocol) if exporter is None else "custom"
    budget_s = resolve_shutdown_timeout(shutdown_timeout_s)
    record_path = record_to if record_to is not None else os.environ.get(RECORD_FILE_ENV) or None
    # OTEL_TRACES_EXPORTER=none (the standard switch) turns the network exporter off,
    # an explicit endpoint included: with `record_to`, spans then only go to the file.
    record_only = exporter is None and _exporter_disabled()
    if exporter is None and not record_only:
        _otlp_exporter_class(chosen_protocol)  # fail now, naming the extra, if not installed
    settings = _content.ContentSettings(
        capture=capture_content and _content.env_allows_capture(),
        redact=redact,
        max_value_bytes=max_value_bytes,
    )
    _content.set_settings(settings)
    with _lock:
        current: Any = trace.get_tracer_provider()
        created = False
        if isinstance(current, TracerProvider):
            provider = current
        elif isinstance(current, trace.ProxyTracerProvider):
            attrs = {SERVICE_NAME: service_name} if service_name else {}
            # The SDK's exit hook would wait up to 30 s per processor: ours is bounded.
            provider = TracerProvider(resource=Resource.create(attrs), shutdown_on_exit=False)
            created = True
        else:
            _log.warning(
                "global tracer provider is %s, not an opentelemetry-sdk TracerProvider; "
                "tracepass cannot add processors to it and returns a detached provider",
                type(current).__qualname__,
            )
            return TracerProvider()
        install(provider)

        wants_exporter = created or endpoint is not None or exporter is not None
        wants_exporter = wants_exporter or record_path is not None
        key = (
            chosen_protocol,
            endpoint,
            tuple(sorted((headers or {}).items())),
            id(exporter),
            str(record_path),
        )
        if wants_exporter:
            if _state.provider is provider and _state.exporter_key is not None:
                if key != _state.exporter_key:
                    _log.warning(
                        "tracepass.configure() called again with different exporter "
                        "settings; keeping the first exporter (one per process)"
                    )
            else:
                exporters: list[SpanExporter] = []
                if record_path is not None:
                    exporters.append(RecordingSpanExporter(record_path))
                if not record_only and (created or endpoint is not None or exporter is not None):
                    if exporter is None:
                        bounded = _otlp_exporter(chosen_protocol, endpoint, headers, budget_s)
                        _state.exporters.append(bounded)
                    exporters.append(exporter or bounded)
                for span_exporter in exporters:
                    processor: SpanProcessor = (
                        BatchSpanProcessor(span_exporter)
                        if batch
                        else SimpleSpanProcessor(span_exporter)
                    )
                    provider.add_span_processor(processor)
                    _state.processors.append(processor)
                _state.exporter_key = key
        _state.shutdown_timeout_s = budget_s
        if not _state.exit_hook:
            atexit.register(shutdown)
            _state.exit_hook = True
        if created:
            trace.set_tracer_provider(provider)
            _state.owns_provider = True
        if _state.provider is not provider:
            _state.provider = provider
        return provider


def force_flush(timeout_millis: int = 30_000) -> bool:
    """Export everything buffered so far (e.g. before a short-lived script exits)."""
    with _lock:
        provider, owns, processors = _state.provider, _state.owns_provider, list(_state.processors)
    if provider is None:
        return True
    if owns:
        return provider.force_flush(timeout_millis)
    return all(p.force_flush(timeout_millis) for p in processors)


def shutdown(timeout_s: float | None = None) -> None:
    """Flush and stop what `configure` set up; an app-owned provider keeps running.

    Takes at most `timeout_s` (default: `configure(shutdown_timeout_s=…)`, 5 s), with
    the collector down too; spans not exported by then are dropped with one warning."""
    with _lock:
        provider, owns, processors = _state.provider, _state.owns_provider, list(_state.processors)
        exporters = list(_state.exporters)
        budget_s = timeout_s if timeout_s is not None else _state.shutdown_timeout_s
        _state.processors.clear()
        _state.exporters.clear()
        _state.exporter_key = None
        if owns and _state.stopped:
            return
        _state.stopped = owns
    if provider is None or (not owns and not processors):
        return

    def stop() -> None:
        if owns:
            provider.shutdown()
        else:
            for processor in processors:
                processor.shutdown()

    bounded_shutdown(stop, exporters, budget_s or resolve_shutdown_timeout(None))
