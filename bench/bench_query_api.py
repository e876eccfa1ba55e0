"""The list API's query (`GET /api/v1/conversations`) over a state file holding 100k
stored results, next to a primary-key lookup of one result measured in the same run
(the cheapest read the state file offers: what `GET /api/v1/conversations/{id}` does).

The results are real: 12 conversation variants (4 agent versions, 3 kinds of failure
or a pass) scored by the real evaluator, stored with their index columns as
`StateStore.put_result` writes them, spread over 100k ids and 10 references with
completion times one second apart; 10% carry a policy violation row. Each query is timed
through `ReadModel.conversations` (SQL + row decoding + the JSON-ready dicts), median of
`--repeats` runs; the target is < 50 ms per query.

With `--postgres URL` (an empty database) or `--postgres auto` (a throw-away cluster,
as the tests start one: needs PostgreSQL's server binaries), the same results are also
written to the PostgreSQL results store (`state.results_url`) through its batch writer,
and every query runs against both in the same run: PostgreSQL ms and its ratio to
SQLite (loopback TCP; each query checks a pooled connection out and back in).

The failure-mode index is filled as `put_result` fills it (the failing variants' real
signatures, `FailureModeIndex.write`), and `GET /api/v1/failure-modes` is timed through
`failure_modes` (grouped counts, examples, trend, `new` against the previous version):
target < 50 ms on the same 100k results.

    .venv/bin/python bench/bench_query_api.py [--results 100000] [--repeats 50]
        [--postgres URL|auto]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tracepass.collector.api.failure_modes import failure_modes
from tracepass.collector.api.read_model import ReadModel
from tracepass.collector.state import StateStore, StoredResult
from tracepass.collector.state.codec import encode_result
from tracepass.collector.state.failure_index import stored_signatures
from tracepass.collector.state.index import index_values
from tracepass.collector.state.store import _PUT_RESULT
from tracepass.evaluator.models import (
    Conversation,
    ExpectedTool,
    Reference,
    ReferenceTurn,
    ToolCall,
    Turn,
)
from tracepass.evaluator.scoring.evaluator import Evaluator
from tracepass.evaluator.stats.rolling import RollingConfig

T0 = 1_700_000_000.0
TARGET_MS = 50.0
REFERENCES = 10


def _variants() -> list[tuple[str, StoredResult]]:
    reference = Reference(
        id="ref",
        turns=(
            ReferenceTurn(
                query="weather in Paris?",
                expected_answer="sunny",
                expected_tools=(ExpectedTool(name="geocode", arguments={"city": "Paris"}),),
            ),
        ),
    )
    evaluator = Evaluator()
    out = []
    for version in ("1.0", "1.1", "1.2", "2.0"):
        for city, answer in (("Paris", "sunny"), ("Lyon", "sunny"), ("Paris", "rain")):
            conv = Conversation(
                id="x",
                agent_name="travel",
                agent_version=version,
                trace_ids=("0" * 32,),
                turns=(
                    Turn(
                        query="weather in Paris?",
                        answer=answer,
                        tool_calls=(ToolCall(name="geocode", arguments={"city": city}),),
                    ),
                ),
            )
            result = evaluator.evaluate(conv, reference, reference_set="travel-refs")
            out.append((version, StoredResult(conv, result, 0)))
    return out


def fill(store: StateStore, n: int) -> None:
    variants = _variants()
    prepared = [(encode_result(s), index_values(s)) for _, s in variants]
    signatures = [stored_signatures(s) for _, s in variants]
    batch = 5000
    for start in range(0, n, batch):
        rows = []
        violations = []
        for i in range(start, min(n, start + batch)):
            text, idx = prepared[i % len(prepared)]
            key = f"conv-{i:07d}"
            # Vary the reference id per row (column 3 of the index values).
            idx = (*idx[:3], f"ref-{i % REFERENCES}", *idx[4:])
            rows.append((key, 0, T0 + i, T0 + i, 4, text, *idx))
            if i % 10 == 0:
                violations.append(("forbidden_tool", key, T0 + i, idx[4]))

        def op(
            conn: Any, rows: list[tuple[Any, ...]] = rows, v: object = violations, at: int = start
        ) -> list[Any]:
            conn.executemany(_PUT_RESULT, rows)
            conn.executemany("INSERT INTO result_violations VALUES (?,?,?,?)", v)
            changes = []
            for i, row in enumerate(rows, start=at):
                k = i % len(variants)
                changes.append(
                    store.failure_modes.write(conn, row[0], variants[k][1], signatures[k], row[2])
                )
            return changes

        # Counted after the commit, as put_result does.
        for change in store.submit(op).result():
            store.failure_modes.applied(change)


def fill_postgres(url: str, n: int) -> object:
    """The rows `fill` writes, written to PostgreSQL through `write_batch`."""
    from tracepass.collector.state.outbox import OutboxRow
    from tracepass.collector.state.postgres import PostgresResults

    pg = PostgresResults(url, write_timeout_s=60.0)
    pg.open()
    variants = _variants()
    prepared = [(encode_result(s), index_values(s)) for _, s in variants]
    batch: list[OutboxRow] = []
    for i in range(n):
        text, idx = prepared[i % len(prepared)]
        idx = (*idx[:3], f"ref-{i % REFERENCES}", *idx[4:])
        violations = (("forbidden_tool", idx[4]),) if i % 10 == 0 else ()
        batch.append(OutboxRow(i, f"conv-{i:07d}", 0, T0 + i, T0 + i, 4, text, idx, violations))
        if len(batch) == 2000:
            pg.write_batch(batch)
            batch = []
    if batch:
        pg.write_batch(batch)
    with pg._connection(60.0) as conn:  # fresh planner statistics, as autovacuum would
        conn.execute("ANALYZE")
    return pg


def _postgres_url(arg: str, stack: contextlib.ExitStack) -> str:
    if arg != "auto":
        return arg
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from postgres_support import postgres_cluster_running

    cluster = stack.enter_context(postgres_cluster_running())
    return str(cluster.create_database("bench_query_api"))


def timed(fn: Callable[[], object], repeats: int) -> float:
    fn()  # warm the page cache and the statement cache
    samples = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t)
    return statistics.median(samples) * 1000.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--postgres", metavar="URL|auto", default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        store = StateStore(Path(tmp) / "state.sqlite")
        store.open()
        t = time.perf_counter()
        fill(store, args.results)
        fill_s = time.perf_counter() - t
        model = ReadModel(store, list, RollingConfig(), clock=lambda: T0 + args.results)
        first = model.conversations({"limit": "50"})
        deep = model.conversations({"limit": "50", "cursor": first["next_cursor"]})
        for _ in range(200):  # a cursor 10k rows deep
            deep = model.conversations({"limit": "50", "cursor": deep["next_cursor"]})
        queries: dict[str, dict[str, str]] = {
            "newest 50": {"limit": "50"},
            "outcome=fail": {"outcome": "fail", "limit": "50"},
            "agent+version (no outcome)": {
                "agent_name": "travel",
                "agent_version": "1.1",
                "limit": "50",
            },
            "agent+version+fail": {
                "agent_name": "travel",
                "agent_version": "1.1",
                "outcome": "fail",
                "limit": "50",
            },
            "reference_id": {"reference_id": "ref-7", "limit": "50"},
            "violation": {"violation": "forbidden_tool", "limit": "50"},
            "since=1h, fail,error": {"since": "1h", "outcome": "fail,error", "limit": "50"},
            "since=2d, fail,error": {"since": "2d", "outcome": "fail,error", "limit": "50"},
            "agent+version+fail,error": {
                "agent_name": "travel",
                "agent_version": "1.1",
                "outcome": "fail,error",
                "limit": "50",
            },
            "reference_set": {"reference_set": "travel-refs", "limit": "50"},
            "agent_name, fail": {"agent_name": "travel", "outcome": "fail", "limit": "50"},
            "violation, fail,error": {
                "violation": "forbidden_tool",
                "outcome": "fail,error",
                "limit": "50",
            },
            "page 200 (cursor)": {"limit": "50", "cursor": deep["next_cursor"]},
            "limit=500": {"limit": "500"},
        }
        key = f"conv-{args.results // 2:07d}"
        lookup_ms = timed(lambda: store.get_result(key), args.repeats)
        print(f"{args.results} stored results (filled in {fill_s:.1f} s)")
        print(f"baseline: primary-key lookup of one result: {lookup_ms:.3f} ms")
        pg: object = None
        pg_model: ReadModel | None = None
        if args.postgres:
            t = time.perf_counter()
            pg = fill_postgres(_postgres_url(args.postgres, stack), args.results)
            print(f"PostgreSQL: filled in {time.perf_counter() - t:.1f} s")
            pg_model = ReadModel(pg, list, RollingConfig(), clock=lambda: T0 + args.results)  # type: ignore[arg-type]
            pg_lookup = timed(lambda: pg.get_result(key), args.repeats)  # type: ignore[attr-defined]
            print(f"PostgreSQL primary-key lookup of one result: {pg_lookup:.3f} ms")
        worst = worst_pg = 0.0
        for name, params in queries.items():
            ms = timed(lambda p=params: model.conversations(p), args.repeats)  # type: ignore[misc]
            n = len(model.conversations(params)["conversations"])
            worst = max(worst, ms) if name != "limit=500" else worst
            line = f"{name:28s} {n:4d} rows  {ms:8.3f} ms  ({ms / lookup_ms:6.1f}x lookup)"
            if pg_model is not None:
                pg_ms = timed(lambda p=params: pg_model.conversations(p), args.repeats)  # type: ignore[misc,union-attr]
                assert pg_model.conversations(params) == model.conversations(params), name
                worst_pg = max(worst_pg, pg_ms) if name != "limit=500" else worst_pg
                line += f"  PostgreSQL {pg_ms:8.3f} ms ({pg_ms / ms:5.1f}x SQLite)"
            print(line)
        verdict = "met" if worst < TARGET_MS else "NOT met"
        print(f"worst 50-row query {worst:.3f} ms: target < {TARGET_MS:.0f} ms {verdict}")
        if pg_model is not None:
            verdict = "met" if worst_pg < TARGET_MS else "NOT met"
            print(
                f"PostgreSQL worst 50-row query {worst_pg:.3f} ms: target < {TARGET_MS:.0f} ms {verdict}"
            )
            pg.close()  # type: ignore[attr-defined]
        modes: dict[str, dict[str, str]] = {
            "failure modes, 1.1 vs 1.0": {"agent_name": "travel", "agent_version": "1.1"},
            "failure modes, all versions": {},
            "failure modes, 1.1, since 1h": {"agent_version": "1.1", "since": "1h"},
        }
        worst_modes = 0.0
        for name, params in modes.items():
            ms = timed(
                lambda p=params: failure_modes(store, p, lambda: T0 + args.results), args.repeats
            )  # type: ignore[misc]
            n = len(failure_modes(store, params, lambda: T0 + args.results)["failure_modes"])
            worst_modes = max(worst_modes, ms)
            print(f"{name:28s} {n:4d} modes {ms:8.3f} ms  ({ms / lookup_ms:6.1f}x lookup)")
        verdict = "met" if worst_modes < TARGET_MS else "NOT met"
        print(
            f"worst failure-modes query {worst_modes:.3f} ms: target < {TARGET_MS:.0f} ms {verdict}"
        )
        store.close()


if __name__ == "__main__":
    main()
