"""Regenerate the OTLP file fixtures: `python tests/data/otlp/generate_fixtures.py`.

Spans come from the real OTel SDK, encoded by the OTLP encoder the exporters use
(`encode_spans`); each file below holds the same two export requests in one of the
layouts `tracepass.collector.receiver.otlpfile` reads. `expected.json` lists what must come out.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import zstandard

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent / "collector"))

from _receiver_support import make_request, to_otlp_json  # noqa: E402


def main() -> None:
    requests = [make_request(2, "conv-a"), make_request(1, "conv-b")]
    lines = [json.dumps(to_otlp_json(r), separators=(",", ":")) for r in requests]
    (HERE / "traces.jsonl").write_text("\n".join(lines) + "\n")
    (HERE / "trace.pretty.json").write_text(json.dumps(to_otlp_json(requests[0]), indent=2))
    frames = b"".join(
        len(b).to_bytes(4, "big") + b for b in (r.SerializeToString() for r in requests)
    )
    (HERE / "traces.binpb").write_bytes(frames)
    zc = zstandard.ZstdCompressor()
    zframes = b""
    for r in requests:
        z = zc.compress(r.SerializeToString())
        zframes += len(z).to_bytes(4, "big") + z
    (HERE / "traces.binpb.zst-frames").write_bytes(zframes)
    (HERE / "traces.jsonl.gz").write_bytes(gzip.compress((HERE / "traces.jsonl").read_bytes()))
    (HERE / "trace.pb").write_bytes(requests[1].SerializeToString())
    expected = {
        "requests": [
            {
                "spans": sorted(
                    f"{s.trace_id.hex()}:{s.span_id.hex()}"
                    for rs in r.resource_spans
                    for ss in rs.scope_spans
                    for s in ss.spans
                )
            }
            for r in requests
        ]
    }
    (HERE / "expected.json").write_text(json.dumps(expected, indent=2) + "\n")


if __name__ == "__main__":
    main()
