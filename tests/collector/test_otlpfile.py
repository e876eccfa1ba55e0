"""`read_otlp_file`: every layout of the fixtures yields the same requests; detection is
by content; errors carry file and line / byte offset."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest
from _receiver_support import make_request, to_otlp_json

from tracepass.collector.receiver.otlpfile import OtlpFileError, read_otlp_bytes, read_otlp_file

DATA = Path(__file__).resolve().parent.parent / "data" / "otlp"
EXPECTED = json.loads((DATA / "expected.json").read_text())["requests"]


def _spans(path: Path) -> list[list[str]]:
    return [
        sorted(
            f"{s.trace_id.hex()}:{s.span_id.hex()}"
            for rs in r.resource_spans
            for ss in rs.scope_spans
            for s in ss.spans
        )
        for r in read_otlp_file(path)
    ]


@pytest.mark.parametrize(
    "name", ["traces.jsonl", "traces.binpb", "traces.binpb.zst-frames", "traces.jsonl.gz"]
)
def test_two_request_layouts(name: str) -> None:
    assert _spans(DATA / name) == [r["spans"] for r in EXPECTED]


def test_single_documents() -> None:
    assert _spans(DATA / "trace.pretty.json") == [EXPECTED[0]["spans"]]
    assert _spans(DATA / "trace.pb") == [EXPECTED[1]["spans"]]


def test_detection_ignores_the_extension(tmp_path: Path) -> None:
    misnamed = tmp_path / "traces.json"
    shutil.copy(DATA / "traces.binpb", misnamed)
    assert _spans(misnamed) == [r["spans"] for r in EXPECTED]


def test_jsonl_equals_protobuf() -> None:
    assert list(read_otlp_file(DATA / "traces.jsonl")) == list(
        read_otlp_file(DATA / "traces.binpb")
    )


def test_whole_file_zstd_and_array(tmp_path: Path) -> None:
    zstandard = pytest.importorskip("zstandard")
    req = make_request(1)
    doc = json.dumps([to_otlp_json(req), to_otlp_json(req)]).encode()
    path = tmp_path / "x"
    path.write_bytes(zstandard.ZstdCompressor().compress(doc))
    assert list(read_otlp_file(path)) == [req, req]


def test_empty_and_blank_files() -> None:
    assert list(read_otlp_bytes(b"")) == []
    assert list(read_otlp_bytes(b"\n  \n")) == []


def test_json_error_names_file_and_line(tmp_path: Path) -> None:
    lines = (DATA / "traces.jsonl").read_text().splitlines()
    doc = json.loads(lines[1])
    doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["spanId"] = "zz" * 8
    path = tmp_path / "bad.jsonl"
    path.write_text(lines[0] + "\n\n" + json.dumps(doc) + "\n")
    with pytest.raises(OtlpFileError) as info:
        list(read_otlp_file(path))
    assert str(info.value) == (
        f"{path}:3: invalid OTLP/JSON: resourceSpans[0].scopeSpans[0].spans[0].spanId: "
        f"not a hex string: '{'zz' * 8}'"
    )


def test_broken_json_syntax(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{"resourceSpans": []}\n{"resourceSpans": [}\n')
    with pytest.raises(OtlpFileError, match=r"broken.json:2:20: invalid JSON"):
        list(read_otlp_file(path))


def test_truncated_frame(tmp_path: Path) -> None:
    data = (DATA / "traces.binpb").read_bytes()
    first = int.from_bytes(data[:4], "big")
    path = tmp_path / "cut.binpb"
    path.write_bytes(data[:-10])
    with pytest.raises(OtlpFileError) as info:
        list(read_otlp_file(path))
    assert f"byte {4 + first}: frame 1 declares" in str(info.value)


def test_corrupt_frame_payload(tmp_path: Path) -> None:
    payload = b"\x0a\x05\x12\x10abc"
    path = tmp_path / "bad.binpb"
    path.write_bytes(len(payload).to_bytes(4, "big") + payload)
    with pytest.raises(OtlpFileError) as info:
        list(read_otlp_file(path))
    assert str(info.value).startswith(f"{path}: byte 0: frame 0: invalid protobuf")


def test_corrupt_gzip(tmp_path: Path) -> None:
    path = tmp_path / "x.gz"
    path.write_bytes(gzip.compress(b"{}")[:-6])
    with pytest.raises(OtlpFileError, match="corrupt gzip file"):
        list(read_otlp_file(path))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(OtlpFileError, match="cannot read"):
        list(read_otlp_file(tmp_path / "nope"))
