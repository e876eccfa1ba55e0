"""The baseline the collector benchmarks compare against: decode each payload with the
generated OTLP classes and read every resource and span attribute into Python values —
the least any consumer of the spans must do."""

from __future__ import annotations

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracepass.collector.normalize.anyvalue import attributes_to_dict


def decode_and_read_attributes(payloads: list[bytes]) -> int:
    """Decode every payload and read every attribute; returns the number of spans."""
    n = 0
    for data in payloads:
        req = ExportTraceServiceRequest.FromString(data)
        for rs in req.resource_spans:
            attributes_to_dict(rs.resource.attributes)
            for ss in rs.scope_spans:
                for span in ss.spans:
                    attributes_to_dict(span.attributes)
                    n += 1
    return n
