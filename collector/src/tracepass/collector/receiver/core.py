"""Protocol- and signal-neutral part of the receivers: admission, the call into the sink,
and the accounting of every outcome.

Keeping this in one place is what makes the two protocols and the two signals (traces,
logs: `signals.py`) behave alike: one in-flight budget shared by gRPC and HTTP and by
both signals, one mapping from failure to outcome label, one place that counts refused
requests and items (`CollectorInstruments`) and logs them (rate-limited, a misbehaving
client must not flood the log).
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

from tracepass.collector.config import ReceiverConfig
from tracepass.collector.instruments import CollectorInstruments
from tracepass.collector.receiver.memory import MemoryGuard, Reservation
from tracepass.collector.receiver.signals import Req, Signal, SignalName
from tracepass.collector.receiver.sink import IngestResult, Overloaded, SpanSink
from tracepass.evaluator.ratelimited_log import RateLimitedLog

__all__ = ["Protocol", "ReceiverCore", "Refusal", "RefusalKind"]

log = logging.getLogger("tracepass.collector.receiver")

Protocol = Literal["grpc", "http"]
# Outcome labels of tracepass_export_requests besides ok / partial.
RefusalKind = Literal[
    "invalid",
    "too_large",
    "overloaded",
    "unavailable",
    "unauthorized",
    "unsupported",
    "timeout",
    "error",
]


@dataclass
class Refusal(Exception):
    """Why a request is answered with an error. `retry_after_s` is set for the
    retryable kinds (overloaded, unavailable); `field` names the bad part for
    BadRequest details."""

    kind: RefusalKind
    message: str
    retry_after_s: float | None = None
    field: str = ""
    counted: bool = False
    hang_up: bool = False  # answer, then close the connection (a body left unread)
    memory: bool = False  # bytes in flight over the memory cap (gRPC: RESOURCE_EXHAUSTED)

    def __str__(self) -> str:
        return self.message


class ReceiverCore:
    def __init__(
        self,
        sink: SpanSink,
        instruments: CollectorInstruments,
        config: ReceiverConfig,
        memory: MemoryGuard | None = None,
    ) -> None:
        self.sink = sink
        self.memory = memory
        self.instruments = instruments
        self.config = config
        self._inflight = 0
        self._draining = False
        self._idle = asyncio.Event()
        self._idle.set()
        self._log = RateLimitedLog(log)
        token = config.bearer_token
        self._expected_auth = f"Bearer {token}".encode() if token else None

    # --- admission ---------------------------------------------------------------------

    @property
    def inflight(self) -> int:
        return self._inflight

    @property
    def draining(self) -> bool:
        return self._draining

    def check_auth(self, header: str | None) -> None:
        if self._expected_auth is None:
            return
        if header is None:
            raise Refusal("unauthorized", "missing bearer token (Authorization: Bearer <token>)")
        try:
            # Raw header bytes outside UTF-8 arrive as surrogates (aiohttp): never a match.
            given = header.strip().encode("utf-8")
        except UnicodeEncodeError:
            raise Refusal("unauthorized", "invalid bearer token") from None
        if not hmac.compare_digest(given, self._expected_auth):
            raise Refusal("unauthorized", "invalid bearer token")

    def check_open(self) -> None:
        """Refuse at once while draining or above the memory soft limit, before a body
        is read (reading it is what would cost the memory)."""
        if self._draining:
            raise Refusal(
                "unavailable", "receiver is shutting down", retry_after_s=self.config.retry_after_s
            )
        if self.memory is not None and self.memory.level() != "ok":
            raise Refusal(
                "unavailable",
                f"collector overloaded: {self.memory.describe()}",
                retry_after_s=self.config.retry_after_s,
            )

    @contextmanager
    def reserve(self, nbytes: int) -> Iterator[Reservation]:
        """Bytes in flight for one request, reserved against the memory cap before they
        are read (`memory.py`) and released however the request ends."""
        reservation = Reservation(self.memory)
        try:
            self.grow(reservation, nbytes)
            yield reservation
        finally:
            reservation.release()

    def grow(self, reservation: Reservation, nbytes: int) -> None:
        """Raise the reservation to `nbytes`, or refuse the request (retryable 503 /
        UNAVAILABLE) when the memory cap cannot cover it."""
        if not reservation.grow_to(nbytes):
            assert self.memory is not None
            raise Refusal(
                "unavailable",
                f"collector overloaded: {self.memory.describe_reservation(nbytes - reservation.held)}",
                retry_after_s=self.config.retry_after_s,
                memory=True,
            )

    @contextmanager
    def admit(self) -> Iterator[None]:
        """One slot of the shared in-flight budget, refused (never queued) when full:
        queuing would only move the overload into memory."""
        self.check_open()
        if self._inflight >= self.config.max_inflight_requests:
            raise Refusal(
                "overloaded",
                f"too many concurrent export requests (limit {self.config.max_inflight_requests})",
                retry_after_s=self.config.retry_after_s,
            )
        self._inflight += 1
        self._idle.clear()
        try:
            yield
        finally:
            self._inflight -= 1
            if self._inflight == 0:
                self._idle.set()

    async def drain(self, timeout_s: float) -> bool:
        """Refuse new requests and wait for the running ones; False on timeout."""
        self._draining = True
        try:
            await asyncio.wait_for(self._idle.wait(), timeout=max(timeout_s, 0.0))
        except TimeoutError:
            return False
        return True

    # --- ingestion ---------------------------------------------------------------------

    async def ingest(self, signal: Signal[Req], protocol: Protocol, request: Req) -> IngestResult:
        """Hand one decoded request of `signal` to the sink and count the outcome."""
        n = signal.count(request)
        signal.received(self.instruments).add(n, {"protocol": protocol})
        labels = {"protocol": protocol, "signal": signal.name}
        if n == 0:
            # The spec asks for success on empty requests; the sink need not see them.
            self.instruments.export_requests.add(1, {**labels, "outcome": "ok"})
            return IngestResult(accepted=0)
        started = time.perf_counter()
        try:
            result = await signal.deliver(self.sink, request)
        except Overloaded as exc:
            raise self._refused_items(
                signal,
                protocol,
                Refusal(
                    "unavailable",
                    f"collector overloaded: {exc.reason}",
                    retry_after_s=exc.retry_after_s,
                ),
                n,
            ) from None
        except Exception as exc:
            log.exception(
                "sink failed on a %s %s export request of %d %s",
                protocol,
                signal.name,
                n,
                signal.items,
            )
            raise self._refused_items(
                signal, protocol, Refusal("error", f"internal error: {type(exc).__name__}"), n
            ) from None
        self.instruments.ingest_seconds.record(time.perf_counter() - started, labels)
        outcome = "partial" if result.rejected else "ok"
        self.instruments.export_requests.add(1, {**labels, "outcome": outcome})
        if result.rejected:
            # The sink counts the items it rejects under its own, more precise reasons.
            self._log.warning(
                f"partial:{protocol}:{signal.name}",
                "%s %s export: %d of %d %s rejected: %s",
                protocol,
                signal.name,
                result.rejected,
                n,
                signal.items,
                result.message,
            )
        return result

    def unexpected(self, signal: SignalName, protocol: Protocol, exc: Exception) -> Refusal:
        """A failure no refusal was written for (a bug): logged with its traceback,
        counted as `error` and answered 500 / INTERNAL rather than escaping uncounted."""
        log.error("unexpected failure on a %s %s export request", protocol, signal, exc_info=exc)
        return self.refused(
            signal, protocol, Refusal("error", f"internal error: {type(exc).__name__}")
        )

    def _refused_items(
        self, signal: Signal[Any], protocol: Protocol, refusal: Refusal, items: int
    ) -> Refusal:
        signal.rejected(self.instruments).add(items, {"reason": refusal.kind})
        return self.refused(signal.name, protocol, refusal, f"{items} {signal.items}")

    def refused(
        self, signal: SignalName, protocol: Protocol, refusal: Refusal, items: str = ""
    ) -> Refusal:
        """Count and log a refused request (once); returns the refusal for `raise`."""
        if refusal.counted:
            return refusal
        refusal.counted = True
        self.instruments.export_requests.add(
            1, {"protocol": protocol, "signal": signal, "outcome": refusal.kind}
        )
        self._log.warning(
            f"{refusal.kind}:{protocol}:{signal}",
            "%s %s export refused (%s)%s: %s",
            protocol,
            signal,
            refusal.kind,
            f", {items}" if items else "",
            refusal.message,
        )
        return refusal
