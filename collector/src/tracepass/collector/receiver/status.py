"""The error vocabulary of both protocols, derived from one `Refusal`.

OTLP says: HTTP failures carry a `google.rpc.Status` body (protobuf or JSON like the
request), 400 with `BadRequest` details, throttling as 429/503 + Retry-After; gRPC
failures carry the same Status in `grpc-status-details-bin`, throttling with `RetryInfo`.
The Python OTel gRPC exporter reads the delay from a separate `google.rpc.retryinfo-bin`
trailer, so both trailers are sent.
"""

from __future__ import annotations

import math

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2

from tracepass.collector.receiver.core import Refusal, RefusalKind

__all__ = ["GRPC_CODES", "HTTP_STATUS", "grpc_trailers", "retry_after_header", "rpc_status"]

HTTP_STATUS: dict[RefusalKind, int] = {
    "invalid": 400,
    "unauthorized": 401,
    "too_large": 413,
    "unsupported": 415,
    "overloaded": 429,
    "timeout": 408,
    "error": 500,
    "unavailable": 503,
}

GRPC_CODES: dict[RefusalKind, grpc.StatusCode] = {
    "invalid": grpc.StatusCode.INVALID_ARGUMENT,
    "unauthorized": grpc.StatusCode.UNAUTHENTICATED,
    "too_large": grpc.StatusCode.RESOURCE_EXHAUSTED,
    "unsupported": grpc.StatusCode.INVALID_ARGUMENT,
    "overloaded": grpc.StatusCode.RESOURCE_EXHAUSTED,
    "timeout": grpc.StatusCode.DEADLINE_EXCEEDED,
    "error": grpc.StatusCode.INTERNAL,
    "unavailable": grpc.StatusCode.UNAVAILABLE,
}

_RPC_CODES: dict[RefusalKind, int] = {
    "invalid": code_pb2.INVALID_ARGUMENT,
    "unauthorized": code_pb2.UNAUTHENTICATED,
    "too_large": code_pb2.RESOURCE_EXHAUSTED,
    "unsupported": code_pb2.INVALID_ARGUMENT,
    "overloaded": code_pb2.RESOURCE_EXHAUSTED,
    "timeout": code_pb2.DEADLINE_EXCEEDED,
    "error": code_pb2.INTERNAL,
    "unavailable": code_pb2.UNAVAILABLE,
}


def retry_info(refusal: Refusal) -> error_details_pb2.RetryInfo | None:
    if refusal.retry_after_s is None:
        return None
    seconds = max(refusal.retry_after_s, 0.0)
    whole = int(seconds)
    return error_details_pb2.RetryInfo(
        retry_delay=duration_pb2.Duration(seconds=whole, nanos=int((seconds - whole) * 1e9))
    )


def rpc_status(refusal: Refusal) -> status_pb2.Status:
    status = status_pb2.Status(code=_RPC_CODES[refusal.kind], message=refusal.message)
    info = retry_info(refusal)
    if info is not None:
        detail = any_pb2.Any()
        detail.Pack(info)
        status.details.append(detail)
    if refusal.kind == "invalid":
        bad = error_details_pb2.BadRequest()
        bad.field_violations.add(field=refusal.field, description=refusal.message)
        detail = any_pb2.Any()
        detail.Pack(bad)
        status.details.append(detail)
    return status


def grpc_trailers(refusal: Refusal) -> tuple[tuple[str, bytes], ...]:
    trailers: list[tuple[str, bytes]] = [
        ("grpc-status-details-bin", rpc_status(refusal).SerializeToString())
    ]
    info = retry_info(refusal)
    if info is not None:
        trailers.append(("google.rpc.retryinfo-bin", info.SerializeToString()))
    return tuple(trailers)


def retry_after_header(refusal: Refusal) -> str | None:
    """RFC 9110 delay-seconds is an integer: round up so clients never retry early."""
    if refusal.retry_after_s is None:
        return None
    return str(max(1, math.ceil(refusal.retry_after_s)))
