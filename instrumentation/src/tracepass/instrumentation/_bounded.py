"""Export that cannot hold a process hostage when the collector is down.

The OTLP exporters retry each batch with backoff until their own timeout (10 s by
default) and log a warning per retry; the SDK's shutdown waits up to 30 s per processor.
A collector that refuses connections cost a short job ~20 s at exit, one that accepts
and never answers ~30 s, with stderr full of "Transient error … retrying". Here:

- `BoundedExporter` wraps the OTLP exporter tracepass creates: the exporter's own retry
  messages are kept out of the log while it runs (only for the calls it makes), and one
  warning line says that spans are dropped (again at most once a minute); every dropped
  span is counted (`dropped_spans`).
- `bounded_shutdown` runs a provider's or processors' shutdown with a deadline: when the
  budget is spent it stops the exporters' retries, logs the one warning (if not said
  already) and returns; what is still queued is dropped.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

_log = logging.getLogger("tracepass.instrumentation")

SHUTDOWN_TIMEOUT_ENV = "TRACEPASS_SHUTDOWN_TIMEOUT_S"
DEFAULT_SHUTDOWN_TIMEOUT_S = 5.0
WARN_INTERVAL_S = 60.0
_OTEL_TIMEOUT_ENVS = ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT")


def resolve_shutdown_timeout(explicit: float | None) -> float:
    """`configure(shutdown_timeout_s=…)`, else TRACEPASS_SHUTDOWN_TIMEOUT_S, else 5 s."""
    if explicit is not None:
        value = explicit
        source = "shutdown_timeout_s"
    else:
        text = os.environ.get(SHUTDOWN_TIMEOUT_ENV, "").strip()
        if not text:
            return DEFAULT_SHUTDOWN_TIMEOUT_S
        source = SHUTDOWN_TIMEOUT_ENV
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"{source}={text!r}: expected seconds, e.g. 5") from None
    if not value > 0:
        raise ValueError(f"{source}={value!r}: expected a positive number of seconds")
    return value


def exporter_timeout_s(budget_s: float) -> float | None:
    """The OTLP exporter's per-batch deadline (retries included): the shutdown budget,
    unless the standard OTEL_EXPORTER_OTLP_[TRACES_]TIMEOUT says otherwise (None: let
    the exporter read it)."""
    if any(os.environ.get(name) for name in _OTEL_TIMEOUT_ENVS):
        return None
    return budget_s


class _Quiet(threading.local):
    active = False


_quiet = _Quiet()


class _DuringBoundedExport(logging.Filter):
    """Drops the OTLP exporters' own records while a `BoundedExporter` call runs in
    this thread (their per-retry warnings and errors; the wrapper says it once)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not _quiet.active


_FILTER = _DuringBoundedExport()
_filtered: set[str] = set()
_filtered_lock = threading.Lock()


def _filter_loggers_of(exporter: Any) -> None:
    names = {cls.__module__ for cls in type(exporter).__mro__ if cls.__module__ != "builtins"}
    names.add("opentelemetry.exporter.otlp.common.http")  # the HTTP client's own module
    with _filtered_lock:
        for name in names - _filtered:
            logging.getLogger(name).addFilter(_FILTER)
            _filtered.add(name)


class _Warner:
    """One warning line, then at most one per WARN_INTERVAL_S; the count in between."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.dropped = 0
        self._last: float | None = None
        self._lock = threading.Lock()
        # Shutting down: the shutdown's own line (if any) is the last word.
        self.closed = False

    @property
    def warned(self) -> bool:
        return self._last is not None

    def dropped_spans(self, n: int, why: str) -> None:
        with self._lock:
            self.dropped += n
            now = time.monotonic()
            recent = self._last is not None and now - self._last < WARN_INTERVAL_S
            if self.closed or recent:
                _log.debug("tracepass: %d more spans not exported to %s", n, self.target)
                return
            self._last = now
            total = self.dropped
        _log.warning(
            "tracepass: spans not exported to %s (%s); %d dropped so far; is the collector "
            "up? (said at most once a minute)",
            self.target,
            why,
            total,
        )


class BoundedExporter(SpanExporter):
    """The OTLP exporter tracepass created, with one warning instead of a log line per
    retry, and every span it could not deliver counted."""

    def __init__(self, inner: SpanExporter, target: str) -> None:
        self.inner = inner
        self.warner = _Warner(target)
        _filter_loggers_of(inner)

    @property
    def dropped_spans(self) -> int:
        return self.warner.dropped

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        _quiet.active = True
        try:
            result = self.inner.export(spans)
        except Exception as exc:  # an exporter bug must not kill the batch thread
            result = SpanExportResult.FAILURE
            why = f"{type(exc).__name__}: {exc}"
        else:
            why = "export failed"
        finally:
            _quiet.active = False
        if result is not SpanExportResult.SUCCESS:
            self.warner.dropped_spans(len(spans), why)
        return result

    def abort(self) -> None:
        """Stop retrying now (the shutdown budget is spent); nothing more is sent."""
        self.warner.closed = True
        _quiet.active = True
        try:
            self.inner.shutdown()
        except Exception:  # already shut down, or the exporter's own trouble
            _log.debug("tracepass: exporter shutdown failed", exc_info=True)
        finally:
            _quiet.active = False

    def shutdown(self) -> None:
        _quiet.active = True
        try:
            self.inner.shutdown()
        finally:
            _quiet.active = False

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self.inner.force_flush(timeout_millis)


def bounded_shutdown(
    stop: Callable[[], None], exporters: Sequence[BoundedExporter], budget_s: float
) -> bool:
    """Run `stop` (the provider's or processors' shutdown) for at most `budget_s`; True
    when it finished with every span delivered. Shortly before the budget ends the
    exporters are aborted (their retries and waits end), one warning names what was
    dropped, and whatever of `stop` is left goes on in a daemon thread that the
    interpreter does not wait for."""
    done = threading.Event()

    def run() -> None:
        try:
            stop()
        except Exception:
            _log.warning("tracepass: shutdown failed", exc_info=True)
        finally:
            done.set()

    grace_s = min(1.0, budget_s / 5)  # for the aborted exporters to return
    threading.Thread(target=run, name="tracepass-shutdown", daemon=True).start()
    if done.wait(budget_s - grace_s):
        return True
    for exporter in exporters:
        exporter.abort()
    finished = done.wait(grace_s)
    dropped = sum(e.dropped_spans for e in exporters)
    if (finished and not dropped) or any(e.warner.warned for e in exporters):
        return finished  # nothing lost, or the export failure was said already
    targets = ", ".join(sorted({e.warner.target for e in exporters})) or "the exporter"
    _log.warning(
        "tracepass: shutdown stopped after %g s (shutdown_timeout_s): spans not yet "
        "exported to %s are dropped; is the collector up?",
        budget_s,
        targets,
    )
    return False
