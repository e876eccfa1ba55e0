"""`tracepass conversations` on the three file layouts of the issue — JSON lines as the
Collector `file` exporter writes them, one OTLP JSON document, length-prefixed binary
protobuf — with the exact JSON shape of the contract, and the installed executable."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from typer.testing import CliRunner

from tracepass.collector.app.cli.main import app

pytestmark = pytest.mark.slow  # starts a process or a server

DATA = Path(__file__).resolve().parents[1] / "data" / "otlp"
EXPECTED = json.loads((DATA / "expected.json").read_text())["requests"]
TRACEPASS = Path(sys.executable).parent / "tracepass"
runner = CliRunner()


def _trace_ids(request: dict[str, Any]) -> set[str]:
    return {s.split(":")[0] for s in request["spans"]}


def _call(n: int, error: str | None) -> dict[str, Any]:
    return {
        "name": "get_weather",
        "arguments": {"city": "Paris", "turn": n},
        "result": f"sunny {n}",
        "error": error,
        "call_id": f"call-{n}",
    }


def _turn(n: int, error: str | None = None) -> dict[str, Any]:
    return {"query": f"question {n}", "answer": f"answer {n}", "tool_calls": [_call(n, error)]}


AGENT = {"name": "weather", "version": "1.2.3"}
# tests/data/otlp/generate_fixtures.py: request 0 is conv-a (2 turns, the second tool
# call fails), request 1 is conv-b (1 turn).
CONV_A = {"conversation_id": "conv-a", "agent": AGENT, "turns": [_turn(0), _turn(1, "boom")]}
CONV_B = {"conversation_id": "conv-b", "agent": AGENT, "turns": [_turn(0)]}


def _run(*args: str) -> dict[str, Any]:
    res = runner.invoke(app, ["conversations", *args, "--format", "json"])
    assert res.exit_code == 0, res.output
    doc: dict[str, Any] = json.loads(res.stdout)
    return doc


# Figures from the spans' times and tokens (docs/cost-latency.md; checked elsewhere).
_FIGURES = frozenset({"trace_ids", "usage", "duration_s", "latency", "spans"})


def _without_trace_ids(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            **{k: v for k, v in c.items() if k not in _FIGURES},
            "turns": [{k: v for k, v in t.items() if k not in _FIGURES} for t in c["turns"]],
        }
        for c in doc["conversations"]
    ]


@pytest.mark.parametrize(
    "files",
    [
        ["traces.jsonl"],  # Collector file exporter, format: json
        ["traces.binpb"],  # Collector file exporter, format: proto (4-byte BE length)
        ["trace.pretty.json", "trace.pb"],  # one OTLP JSON document + one bare protobuf
    ],
)
def test_json_shape_on_each_layout(files: list[str]) -> None:
    doc = _run(*(str(DATA / f) for f in files))
    assert list(doc) == ["conversations"]
    for conv in doc["conversations"]:
        assert list(conv) == [
            "conversation_id", "agent", "trace_ids", "usage", "duration_s", "latency", "turns"
        ]  # fmt: skip
        assert list(conv["agent"]) == ["name", "version"]
        for turn in conv["turns"]:
            assert list(turn) == [
                "query", "answer", "tool_calls", "usage", "duration_s", "latency", "spans"
            ]  # fmt: skip
            assert list(turn["usage"]) == [
                "input_tokens", "output_tokens", "cached_input_tokens", "reasoning_tokens",
                "cache_write_input_tokens", "model_calls", "cost_usd", "cost_source", "missing",
            ]  # fmt: skip
            for call in turn["tool_calls"]:
                assert list(call) == ["name", "arguments", "result", "error", "call_id"]
    assert _without_trace_ids(doc) == [CONV_A, CONV_B]
    a, b = doc["conversations"]
    assert len(a["trace_ids"]) == 2  # one trace per turn
    assert set(a["trace_ids"]) == _trace_ids(EXPECTED[0])
    assert b["trace_ids"] == sorted(_trace_ids(EXPECTED[1]))


def test_layouts_agree_and_order_does_not_matter() -> None:
    jsonl = _run(str(DATA / "traces.jsonl"))
    assert _run(str(DATA / "traces.binpb")) == jsonl
    assert _run(str(DATA / "trace.pb"), str(DATA / "trace.pretty.json")) == jsonl
    # Compressed variants read the same (gzip whole file; zstd frames).
    assert _run(str(DATA / "traces.jsonl.gz")) == jsonl


def test_unparseable_arguments_are_kept_raw(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("t")
    with (
        tracer.start_as_current_span(
            "invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent"}
        ),
        tracer.start_as_current_span(
            "execute_tool t",
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "t",
                "gen_ai.tool.call.arguments": "{not json",
            },
        ),
    ):
        pass
    provider.shutdown()
    f = tmp_path / "one.pb"
    f.write_bytes(encode_spans(exporter.get_finished_spans()).SerializeToString())
    (conv,) = _run(str(f))["conversations"]
    # Without a conversation id the trace is the conversation.
    assert conv["conversation_id"] == conv["trace_ids"][0]
    # No gen_ai.agent.name: the agent is the resource's service.name (the SDK default).
    assert conv["agent"] == {"name": "unknown_service:python", "version": None}
    ((call,),) = [t["tool_calls"] for t in conv["turns"]]
    assert call["arguments"] == {"_raw": "{not json"}


def test_extra_conversation_id_key(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("t")
    for _turn in range(2):  # two traces, one conversation via the app's own key
        with tracer.start_as_current_span(
            "invoke_agent a",
            attributes={"gen_ai.operation.name": "invoke_agent", "app.chat_id": "chat-7"},
        ):
            pass
    provider.shutdown()
    f = tmp_path / "two.pb"
    f.write_bytes(encode_spans(exporter.get_finished_spans()).SerializeToString())
    assert len(_run(str(f))["conversations"]) == 2
    (conv,) = _run(str(f), "--conversation-id-key", "app.chat_id")["conversations"]
    assert conv["conversation_id"] == "chat-7"
    assert len(conv["turns"]) == 2


def test_installed_executable_and_bad_input(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    proc = subprocess.run(
        [str(TRACEPASS), "conversations", str(DATA / "traces.jsonl"), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert _without_trace_ids(json.loads(out.read_text())) == [CONV_A, CONV_B]
    bad = tmp_path / "bad.binpb"
    bad.write_bytes((100).to_bytes(4, "big") + b"\x0a\x02")
    proc = subprocess.run(
        [str(TRACEPASS), "conversations", str(bad)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 2
    assert f"{bad}: byte 0: frame 0 declares 100 bytes but only 2 remain" in proc.stderr


def test_table_numbers_turns_from_1() -> None:
    """As the UI and the failure reasons do (`turn 1: …`)."""
    res = runner.invoke(app, ["conversations", str(DATA / "traces.jsonl")], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    numbers = [
        line.split("│")[3].strip()
        for line in res.stdout.splitlines()
        if "question" in line and line.startswith("│")
    ]
    assert numbers == ["1", "2", "1"], res.stdout
