"""Issue 21 #1 and #2: tool schemas declared by spans are hostile input. Anyone who can
send one span chose them, so they never fetch anything (`$ref` to a URL or a file),
never run a backtracking regular expression, never compare 8,000 objects pairwise, and
never hold the event loop: a schema beyond a bound leaves the check unknown (counted),
never a verdict. The end-to-end tests run a real `tracepass serve` with a listener that
accepts connections and never answers: before the fix it was fetched (and froze the
collector, again after kill -9 and restart)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _serve import Serve, write_config
from test_normalize_basics import make_request, make_span

from tracepass.evaluator.schema_guard import (
    MAX_SCHEMA_DEPTH,
    SchemaUnknown,
    unknown_counts,
)
from tracepass.evaluator.scoring.learned_checks import check_arguments, validate_arguments

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


class SilentListener:
    """A TCP listener that accepts every connection, records it, and never answers."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._held: list[socket.socket] = []
        self._stop = False
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        self.sock.settimeout(0.2)
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            self._held.append(conn)

    def close(self) -> None:
        self._stop = True
        for conn in self._held:
            conn.close()
        self.sock.close()


@pytest.fixture
def listener() -> Iterator[SilentListener]:
    s = SilentListener()
    yield s
    s.close()


def _unknown(arguments: dict[str, Any], schema: dict[str, Any]) -> str:
    with pytest.raises(SchemaUnknown) as info:
        check_arguments(arguments, schema)
    return info.value.reason


# ----------------------------------------------------------------------------- in process


def test_http_ref_is_never_fetched(listener: SilentListener) -> None:
    url = f"http://127.0.0.1:{listener.port}/internal-admin?probe=1"
    assert _unknown({"a": 1}, {"$ref": url}) == "external_ref"
    assert _unknown({"a": 1}, {"properties": {"a": {"$ref": url + "&nested"}}}) == "external_ref"
    # An in-document `#` reference resolved against a remote `$id`: unresolvable, not fetched.
    based = {"$id": f"http://127.0.0.1:{listener.port}/x", "properties": {"a": {"$ref": "#/no"}}}
    assert _unknown({"a": 1}, based) == "ref_unresolvable"
    time.sleep(0.5)  # a fetch would have connected by now
    assert listener.accepted == 0


def test_file_ref_is_refused() -> None:
    assert _unknown({"a": 1}, {"$ref": "file:///dev/zero"}) == "external_ref"
    assert _unknown({"a": 1}, {"$ref": "other.json#/x"}) == "external_ref"


def test_in_document_refs_still_validate() -> None:
    schema = {
        "$defs": {"id": {"type": "string"}},
        "type": "object",
        "properties": {"flight_id": {"$ref": "#/$defs/id"}},
    }
    assert check_arguments({"flight_id": "LIS1"}, schema) is None
    assert check_arguments({"flight_id": 7}, schema) == (
        "$.flight_id",
        "7 is not of type 'string'",
    )


def test_ref_cycle_is_unknown() -> None:
    assert _unknown({"x": 1}, {"$ref": "#"}) == "recursion"


def test_backtracking_pattern_completes() -> None:
    """`^(a+)+$` on 'a'*30+'!' backtracks ~2^30 steps in Python's `re`; RE2 is linear."""
    hostile = "a" * 30 + "!"
    schema = {"properties": {"s": {"pattern": "^(a+)+$"}}}
    failed = check_arguments({"s": hostile}, schema)
    assert failed is not None
    assert failed[0] == "$.s"
    keys = {"patternProperties": {"^(a+)+$": {}}, "additionalProperties": False}
    failed = check_arguments({hostile: 1}, keys)
    assert failed is not None
    assert "does not match any of the regexes" in failed[1]


def test_pattern_re2_cannot_run_is_unknown() -> None:
    schema = {"properties": {"s": {"pattern": "^(?=a)(a)\\1$"}}}
    assert _unknown({"s": "aa"}, schema) == "pattern_unsupported"


def test_unique_items_over_8000_objects_completes() -> None:
    schema = {"properties": {"x": {"type": "array", "uniqueItems": True}}}
    distinct = [{"k": i, "v": [i, {"n": str(i)}]} for i in range(8000)]
    assert check_arguments({"x": distinct}, schema) is None
    repeated = [*distinct, {"v": [3, {"n": "3"}], "k": 3.0}]  # 3 == 3.0 in JSON Schema
    failed = check_arguments({"x": repeated}, schema)
    assert failed is not None
    assert failed[0] == "$.x"
    assert "non-unique" in failed[1]
    assert check_arguments({"x": [1, True, "1", None, 0, False]}, schema) is None


def test_size_and_depth_bounded() -> None:
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(MAX_SCHEMA_DEPTH + 1):
        node["items"] = {}
        node = node["items"]
    assert _unknown({}, deep) == "schema_too_large"
    wide = {"properties": {f"p{i}": {"type": "string"} for i in range(5000)}}
    assert _unknown({}, wide) == "schema_too_large"


def test_exponential_refs_stop_at_the_time_limit() -> None:
    """A DAG of `anyOf` references doubles the work per level (2^40 steps): the
    per-conversation deadline stops it and the check is unknown, counted."""
    defs: dict[str, Any] = {"a0": {"type": "string"}}
    for i in range(1, 41):
        defs[f"a{i}"] = {"anyOf": [{"$ref": f"#/$defs/a{i - 1}"}] * 2}
    schema = {"$defs": defs, "properties": {"x": {"$ref": "#/$defs/a40"}}}
    before = unknown_counts()["time_limit"]
    assert validate_arguments({"x": 1}, schema) is None
    assert unknown_counts()["time_limit"] == before + 1


# ----------------------------------------------------------------------------- end to end


def _hostile_request(port: int, trace: int) -> bytes:
    """One agent turn whose model span offers tools with hostile schemas, and calls of
    each."""
    definitions = [
        {
            "name": "fetch",
            "parameters": {"$ref": f"http://127.0.0.1:{port}/internal-admin?probe=1"},
        },
        {"name": "zero", "parameters": {"properties": {"a": {"$ref": "file:///dev/zero"}}}},
        {"name": "redos", "parameters": {"properties": {"s": {"pattern": "^(a+)+$"}}}},
        {"name": "uniq", "parameters": {"properties": {"x": {"uniqueItems": True}}}},
    ]
    calls = [
        ("fetch", {"a": 1}),
        ("zero", {"a": 1}),
        ("redos", {"s": "a" * 30 + "!"}),
        ("uniq", {"x": [{"k": i} for i in range(8000)]}),
    ]
    trace_id = trace.to_bytes(16, "big")
    spans = [
        make_span(
            "invoke_agent travel",
            {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "travel"},
            span_id=1,
            trace_id=trace_id,
            start=1_000,
            end=9_000,
        ),
        make_span(
            "chat fake",
            {"gen_ai.operation.name": "chat", "gen_ai.tool.definitions": json.dumps(definitions)},
            span_id=2,
            parent=1,
            trace_id=trace_id,
            start=1_100,
            end=1_200,
        ),
    ]
    for k, (name, args) in enumerate(calls):
        spans.append(
            make_span(
                f"execute_tool {name}",
                {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": name,
                    "gen_ai.tool.call.arguments": json.dumps(args),
                },
                span_id=3 + k,
                parent=1,
                trace_id=trace_id,
                start=2_000 + k * 100,
                end=2_050 + k * 100,
            )
        )
    return make_request(*spans).SerializeToString()  # type: ignore[arg-type]


def _wait_for_unknown(serve: Serve, reason: str, at_least: int) -> None:
    deadline = time.monotonic() + 120
    label = f'reason="{reason}"'

    def counted() -> float:
        return sum(
            v
            for (name, labels), v in serve.samples().items()
            if name == "tracepass_schema_checks_unknown_total" and label in labels
        )

    while counted() < at_least:
        assert serve.proc.poll() is None, "the collector exited"
        assert serve.request("GET", "/healthz")[0] == 200
        assert time.monotonic() < deadline, f"no unknown schema check counted ({reason})"
        time.sleep(0.2)


def test_serve_fetches_nothing_and_stays_responsive(
    tmp_path: Path, listener: SilentListener
) -> None:
    serve = Serve(write_config(tmp_path, tmp_path / "state.db"))
    try:
        status, _ = serve.request("POST", "/v1/traces", _hostile_request(listener.port, 1))
        assert status == 200
        _wait_for_unknown(serve, "external_ref", 2)
        deadline = time.monotonic() + 120
        while True:  # counted while evaluating; listed once the result is stored
            status, body = serve.request("GET", "/api/v1/conversations")
            assert status == 200
            listed = json.loads(body)["conversations"]
            if listed:
                break
            assert time.monotonic() < deadline, "the result was never stored"
            time.sleep(0.2)
        (conv,) = listed
        # The two checks that could run: the pattern fails; the 8,000 objects are unique.
        schema_reasons = [r for r in conv["reasons"] if r.startswith("violation arguments_schema")]
        assert len(schema_reasons) == 1
        assert "redos: $.s" in schema_reasons[0]
        assert serve.request("GET", "/healthz")[0] == 200
    finally:
        serve.stop()
    assert listener.accepted == 0


def test_recovery_after_kill9_does_not_fetch(tmp_path: Path, listener: SilentListener) -> None:
    """Open (unevaluated) conversations are re-evaluated after a crash: through the same
    guarded path."""
    state = tmp_path / "state.db"
    slow = write_config(tmp_path, state, assembly={"idle_timeout_s": 3600, "trace_grace_s": 3600})
    serve = Serve(slow)
    try:
        status, _ = serve.request("POST", "/v1/traces", _hostile_request(listener.port, 2))
        assert status == 200
    finally:
        serve.stop(kill=True)
    serve = Serve(write_config(tmp_path, state))
    try:
        _wait_for_unknown(serve, "external_ref", 2)
        assert serve.request("GET", "/healthz")[0] == 200
    finally:
        serve.stop()
    assert listener.accepted == 0


def test_json_nested_beyond_the_bound_is_kept_as_text() -> None:
    """Found by the schema fuzz: a tool schema or arguments nested ~300 deep were decoded,
    and the conversation's result then could not be stored (pydantic stops serializing at
    about 255 levels): an evaluation error, the result lost. Such JSON is kept as text."""
    from tracepass.collector.records import (
        MAX_JSON_DEPTH,
        NOT_JSON,
        coerce_arguments,
        coerce_result,
        loads,
    )

    deep = '{"x":' * 300 + "1" + "}" * 300
    assert loads(deep) is NOT_JSON
    assert loads("[" * 300 + "]" * 300) is NOT_JSON
    assert coerce_arguments(deep) == {"_raw": deep}
    assert coerce_result(deep) == deep
    fits = '{"x":' * (MAX_JSON_DEPTH - 1) + "1" + "}" * (MAX_JSON_DEPTH - 1)
    assert loads(fits) is not NOT_JSON
    assert coerce_arguments(fits)["x"]["x"] is not None


async def test_slow_validation_leaves_the_event_loop() -> None:
    """A schema that needs the whole time limit is validated on a worker thread: the loop
    keeps running meanwhile (a ticker advances), and the check ends unknown."""
    import asyncio

    from tracepass.collector.pipeline import assemble_offline
    from tracepass.evaluator.scoring.evaluator import EvaluationConfig, Evaluator

    defs: dict[str, Any] = {"a0": {"type": "string"}}
    for i in range(1, 41):
        defs[f"a{i}"] = {"anyOf": [{"$ref": f"#/$defs/a{i - 1}"}] * 2}
    schema = {"$defs": defs, "properties": {"x": {"$ref": "#/$defs/a40"}}}
    spans = [
        make_span("invoke_agent a", {"gen_ai.operation.name": "invoke_agent"}, span_id=1),
        make_span(
            "chat",
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.tool.definitions": json.dumps([{"name": "t", "parameters": schema}]),
            },
            span_id=2,
            parent=1,
        ),
        make_span(
            "execute_tool t",
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "t",
                "gen_ai.tool.call.arguments": '{"x": 1}',
            },
            span_id=3,
            parent=1,
        ),
    ]
    (conversation,) = assemble_offline([make_request(*spans)])  # type: ignore[arg-type]
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    task = asyncio.create_task(ticker())
    before = unknown_counts()["time_limit"]
    result = await Evaluator(EvaluationConfig()).aevaluate(conversation, None)
    task.cancel()
    assert result.violations == ()
    assert unknown_counts()["time_limit"] == before + 1
    assert ticks > 0  # the loop ran while the schema was validated
