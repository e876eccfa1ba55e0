"""Build the OpenTelemetry SDK providers that carry tracepass's own metrics and events.

Two metric readers share one MeterProvider, so every instrument is exported both ways
with identical values: a pull reader for Prometheus (`/metrics`, served by
prometheus_client on its own thread and a private registry, so several providers can
live in one process, e.g. under pytest-xdist) and a periodic OTLP push reader when an
endpoint is configured (`metrics.otlp_endpoint`, else the standard
OTEL_EXPORTER_OTLP_(METRICS_)ENDPOINT variables). Evaluation events go through a
LoggerProvider with an OTLP log exporter under the same rule.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry._logs import Logger
from opentelemetry.metrics import Meter
from opentelemetry.sdk._logs import LoggerProvider, LogRecordProcessor
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource

from tracepass.collector.config import MetricsConfig
from tracepass.collector.export.exemplars import ExemplarCollector, ExemplarStore
from tracepass.collector.receiver import BindError, reason_of

__all__ = ["Telemetry", "build_telemetry", "otlp_settings"]

_log = logging.getLogger(__name__)
METER_NAME = "tracepass.collector"


@dataclass
class Telemetry:
    """Handle on the providers; `shutdown()` flushes and stops everything it started."""

    meter_provider: MeterProvider
    logger_provider: LoggerProvider | None
    prometheus_host: str | None = None
    prometheus_port: int | None = None  # the bound port (useful with port 0)
    otlp_endpoint: str | None = None
    # Exemplars of the outcome counters on /metrics (None without Prometheus).
    exemplars: ExemplarStore | None = None
    _httpd: Any = None
    _thread: Any = None
    shutdown_timeout_s: float = 5.0
    _closed: bool = field(default=False, repr=False)

    def meter(self, name: str = METER_NAME) -> Meter:
        return self.meter_provider.get_meter(name)

    def event_logger(self, name: str = METER_NAME) -> Logger | None:
        return None if self.logger_provider is None else self.logger_provider.get_logger(name)

    @property
    def prometheus_url(self) -> str | None:
        if self.prometheus_port is None:
            return None
        host = self.prometheus_host or "127.0.0.1"
        if host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1"
        return f"http://{host}:{self.prometheus_port}/metrics"

    def shutdown(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            if self._thread is not None:
                self._thread.join(timeout=5)
        # The final export is bounded: an unreachable OTLP endpoint must not hold SIGTERM.
        self.meter_provider.shutdown(timeout_millis=self.shutdown_timeout_s * 1000.0)
        if self.logger_provider is not None:
            self.logger_provider.shutdown()


def otlp_settings(config: MetricsConfig, signal: str) -> tuple[str | None, str]:
    """(endpoint or None, protocol) for `signal` ("metrics" or "logs").

    `None` with OTLP env vars set means "let the exporter read the environment"; the
    returned endpoint is then the env value (for reporting only).
    """
    sig = signal.upper()
    env_endpoint = os.environ.get(f"OTEL_EXPORTER_OTLP_{sig}_ENDPOINT") or os.environ.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT"
    )
    protocol: str = config.otlp_protocol
    if config.otlp_endpoint is None:
        protocol = (
            os.environ.get(f"OTEL_EXPORTER_OTLP_{sig}_PROTOCOL")
            or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
            or protocol
        )
    return (config.otlp_endpoint or env_endpoint), protocol


def _http_url(base: str, signal: str) -> str:
    path = f"/v1/{signal}"
    return base if base.rstrip("/").endswith(path) else base.rstrip("/") + path


def _metric_exporter(endpoint: str, protocol: str, explicit: bool, timeout_s: float) -> Any:
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import (
            OTLPMetricExporter as GrpcExporter,
        )

        return GrpcExporter(
            endpoint=endpoint, insecure=endpoint.startswith("http://"), timeout=timeout_s
        )
    if protocol not in ("http/protobuf",):
        raise ValueError(f"unsupported OTLP protocol {protocol!r} (grpc | http/protobuf)")
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
        OTLPMetricExporter as HttpExporter,
    )

    return HttpExporter(
        endpoint=_http_url(endpoint, "metrics") if explicit else None, timeout=timeout_s
    )


def _log_exporter(endpoint: str, protocol: str, explicit: bool, timeout_s: float) -> Any:
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import (
            OTLPLogExporter as GrpcLogExporter,
        )

        return GrpcLogExporter(
            endpoint=endpoint, insecure=endpoint.startswith("http://"), timeout=timeout_s
        )
    from opentelemetry.exporter.otlp.proto.http._log_exporter import (
        OTLPLogExporter as HttpLogExporter,
    )

    return HttpLogExporter(
        endpoint=_http_url(endpoint, "logs") if explicit else None, timeout=timeout_s
    )


def metrics_token(own: str | None, fallback: str | None) -> str | None:
    """The token /metrics requires: `metrics.bearer_token` when set (`""`: explicitly
    none), else the receiver's, so setting any token never leaves /metrics open by
    accident (docs/configuration.md)."""
    token = own if own is not None else fallback
    return token or None


def build_telemetry(
    config: MetricsConfig,
    *,
    resource: Resource | None = None,
    extra_readers: Sequence[MetricReader] = (),
    log_processors: Sequence[LogRecordProcessor] = (),
    default_host: str = "0.0.0.0",
    fallback_bearer_token: str | None = None,
) -> Telemetry:
    """Start the exporters described by `config`. `extra_readers` / `log_processors`
    let callers (and tests) attach more destinations, e.g. in-memory ones."""
    resource = resource or Resource.create({"service.name": "tracepass"})
    readers: list[MetricReader] = list(extra_readers)
    httpd = thread = None
    exemplars: ExemplarStore | None = None
    host: str | None = None
    port: int | None = None
    if config.prometheus_enabled:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
        from prometheus_client import CollectorRegistry

        from tracepass.collector.export.metrics_http import serve_metrics

        # The OTel reader fills a private registry; the served one adds exemplars to
        # its counter samples (`exemplars.py`: the OTel exporter writes none).
        source = CollectorRegistry(auto_describe=True)
        readers.append(PrometheusMetricReader(registry=source))
        exemplars = ExemplarStore(conversation_ids=config.exemplar_conversation_ids)
        registry = CollectorRegistry()
        registry.register(ExemplarCollector(source, exemplars))
        # No prometheus_host: the receivers' host (`--host`), never silently all interfaces.
        host = config.prometheus_host or default_host
        try:
            httpd, thread = serve_metrics(
                registry,
                host,
                config.prometheus_port,
                metrics_token(config.bearer_token, fallback_bearer_token),
            )
        except OSError as exc:
            raise BindError(
                "metrics.prometheus_port", host, config.prometheus_port, reason_of(exc)
            ) from exc
        port = int(httpd.server_address[1])
        _log.info("Prometheus metrics on http://%s:%d/metrics", host, port)

    metrics_endpoint, metrics_protocol = otlp_settings(config, "metrics")
    if metrics_endpoint:
        exporter = _metric_exporter(
            metrics_endpoint,
            metrics_protocol,
            explicit=config.otlp_endpoint is not None,
            timeout_s=config.otlp_timeout_s,
        )
        readers.append(
            PeriodicExportingMetricReader(
                exporter, export_interval_millis=config.export_interval_s * 1000.0
            )
        )
        _log.info("OTLP metrics push (%s) to %s", metrics_protocol, metrics_endpoint)

    meter_provider = MeterProvider(resource=resource, metric_readers=readers)

    # Evaluation events exist only where something exports them: with no OTLP logs
    # endpoint and no extra processor they would be built (≈ 10 log records and their
    # attributes per conversation, a fifth of the evaluation path's CPU) only to be
    # dropped, so then there is no logger provider and `event_logger()` is None.
    logger_provider: LoggerProvider | None = None
    logs_endpoint, logs_protocol = otlp_settings(config, "logs")
    if config.emit_evaluation_events and (logs_endpoint or log_processors):
        logger_provider = LoggerProvider(resource=resource)
        for proc in log_processors:
            logger_provider.add_log_record_processor(proc)
        if logs_endpoint:
            logger_provider.add_log_record_processor(
                BatchLogRecordProcessor(
                    _log_exporter(
                        logs_endpoint,
                        logs_protocol,
                        explicit=config.otlp_endpoint is not None,
                        timeout_s=config.otlp_timeout_s,
                    ),
                    export_timeout_millis=config.otlp_timeout_s * 1000.0,
                )
            )
    return Telemetry(
        meter_provider=meter_provider,
        logger_provider=logger_provider,
        prometheus_host=host,
        prometheus_port=port,
        otlp_endpoint=metrics_endpoint,
        exemplars=exemplars,
        _httpd=httpd,
        _thread=thread,
        shutdown_timeout_s=config.otlp_timeout_s,
    )
