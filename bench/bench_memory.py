"""Memory per buffered span of the real `tracepass serve` process.

`--conversations` open conversations of 10 spans each (2 turns x (invoke_agent + 4
execute_tool), queries that match no reference, no end marker: nothing completes during
the run) are sent over OTLP/HTTP to a fresh server (`batch` durability, references and
metrics on); the figure is the growth of the server's resident set (VmRSS from
/proc/<pid>/statm) between start-up and the end of the load, divided by the spans
buffered. It includes everything the process keeps per span: records, the per-conversation
indexes, allocator slack and SQLite's page cache (bounded, a few MB). The same-run
baseline is the size of those spans on the wire (the protobuf request bytes), so the
ratio says how many times its wire size a buffered span costs.

The 100,000 x 10 extrapolation is `RSS at start + 1,000,000 x bytes per span`: linear in
the buffered spans, which holds because every per-span structure is; it is printed as an
extrapolation, not a measurement.

    .venv/bin/python bench/bench_memory.py [--conversations N] [--repeats R]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from _e2e import LoadGenerator, proc_rss_bytes, request, start_server

SPANS_PER_CONVERSATION = 10
CONVERSATIONS_PER_REQUEST = 51  # 510 spans per request


def payloads(conversations: int) -> list[bytes]:
    out = []
    for first in range(0, conversations, CONVERSATIONS_PER_REQUEST):
        n = min(CONVERSATIONS_PER_REQUEST, conversations - first)
        out.append(request(first, n, prefix="m", matching=False, end_marker=False, turns=2))
    return out


def measure(data: list[bytes], spans: int, tmp: Path) -> tuple[int, int]:
    """(RSS at start, RSS growth) of one fresh server holding `spans` open spans."""
    server = start_server(tmp, "batch")
    try:
        time.sleep(0.5)
        rss0 = proc_rss_bytes(server.pid)
        load = LoadGenerator(server.http_port, data).result()
        assert load.other == 0, f"{load.other} requests failed"
        time.sleep(1.0)  # let the writer thread finish its last commit
        return rss0, proc_rss_bytes(server.pid) - rss0
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    data = payloads(args.conversations)
    spans = args.conversations * SPANS_PER_CONVERSATION
    wire = sum(len(p) for p in data) / spans
    starts, per_span = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            rss0, grown = measure(data, spans, Path(tmp) / str(r))
            starts.append(rss0)
            per_span.append(grown / spans)
    b = statistics.median(per_span)
    print(
        f"{args.conversations:,} open conversations x {SPANS_PER_CONVERSATION} spans = "
        f"{spans:,} buffered spans, batch durability; median of {args.repeats}"
    )
    print(f"{'baseline: protobuf wire size per span':<44}: {wire:>8,.0f} bytes")
    print(
        f"{'serve RSS growth per buffered span':<44}: {b:>8,.0f} bytes  ({b / wire:.2f}x wire)"
        f"  [{min(per_span):,.0f} .. {max(per_span):,.0f}]"
    )
    rss0 = statistics.median(starts)
    print(f"{'serve RSS at start':<44}: {rss0 / 1e6:>8,.0f} MB")
    print(
        f"{'extrapolated: 100,000 x 10 spans':<44}: {(rss0 + 1_000_000 * b) / 1e9:>8.2f} GB"
        " (start + 1M x bytes per span)"
    )
    print("target: <= 1,000 bytes per buffered span (100k x 10 <= 1.1 GB)")


if __name__ == "__main__":
    main()
