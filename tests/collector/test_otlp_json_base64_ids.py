"""A file written with protobuf's generic JSON writer (base64 ids) gets an error that says
base64 and how to record traces instead, from the decoder and from the CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from google.protobuf.json_format import MessageToJson
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracepass.collector.receiver.otlp_json import OtlpJsonError, decode_json_bytes


def _request() -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add()
    span.trace_id = bytes(range(1, 17))
    span.span_id = bytes(range(1, 9))
    span.name = "execute_tool lookup"
    return request


def test_base64_trace_id_is_recognized() -> None:
    with pytest.raises(OtlpJsonError) as info:
        decode_json_bytes(MessageToJson(_request()).encode())
    message = str(info.value)
    assert "traceId" in message
    assert "base64" in message
    assert "record_to" in message


def test_hex_ids_still_decode() -> None:
    text = MessageToJson(_request())
    text = text.replace('"AQIDBAUGBwgJCgsMDQ4PEA=="', '"0102030405060708090a0b0c0d0e0f10"')
    text = text.replace('"AQIDBAUGBwg="', '"0102030405060708"')
    decoded = decode_json_bytes(text.encode())
    assert decoded.resource_spans[0].scope_spans[0].spans[0].trace_id == bytes(range(1, 17))


@pytest.mark.slow  # starts a process or a server
def test_cli_names_base64_with_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "traces.jsonl"
    path.write_text(MessageToJson(_request(), indent=None) + "\n")
    tracepass = Path(sys.executable).with_name("tracepass")
    out = subprocess.run(
        [str(tracepass), "conversations", str(path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 2
    assert f"{path}:1:" in out.stderr
    assert "base64" in out.stderr
