"""`tracepass inspect` on a framework tracepass does not know: the "nothing read" report
(span names, scopes, attribute keys seen, the pointer to a mapping), `--strict`, and
`--suggest-mapping` whose output, pasted into a config, reads the file right.

The "in-house" agent is traced with the real OTel SDK and written by the real OTLP
protobuf encoder; only its attribute names are made up (no convention knows them).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode
from typer.testing import CliRunner

from tracepass.collector.app.cli.main import app
from tracepass.collector.app.cli.sources import conversations_from_otlp, requests_from_otlp
from tracepass.collector.config import load_config
from tracepass.collector.pipeline import assemble_offline
from tracepass.collector.pipeline.offline import default_normalizer

runner = CliRunner()

TURNS = [
    ("Weather in Paris?", [("get_weather", {"city": "Paris"}, "sunny", None)], "It is sunny."),
    (
        "Book FL-1 then FL-2",
        [
            ("book", {"flight": {"id": "FL-1"}}, None, "sold out"),
            ("book", {"flight": {"id": "FL-2"}}, {"ok": True}, None),
        ],
        "Booked FL-2.",
    ),
]


@pytest.fixture(scope="module")
def inhouse_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "inhouse-svc"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("acme.agentkit", "0.3")
    for query, calls, answer in TURNS:
        with tracer.start_as_current_span("acme.run") as run:
            run.set_attribute("acme.session_id", "sess-42")
            run.set_attribute("acme.agent_name", "travel")
            run.set_attribute("acme.prompt", query)
            for i, (name, args, result, error) in enumerate(calls):
                with tracer.start_as_current_span("acme.step") as step:
                    step.set_attribute("acme.tool_name", name)
                    step.set_attribute("acme.call_id", f"{name}-{i}")
                    step.set_attribute("acme.args", json.dumps(args))
                    if result is not None:
                        step.set_attribute("acme.result", json.dumps(result))
                    if error is not None:
                        step.set_status(Status(StatusCode.ERROR, error))
            run.set_attribute("acme.answer", answer)
    provider.shutdown()
    # Length-prefixed protobuf, as the OpenTelemetry Collector file exporter writes it.
    path = tmp_path_factory.mktemp("inhouse") / "inhouse.otlp.pb"
    body = encode_spans(exporter.get_finished_spans()).SerializeToString()
    path.write_bytes(len(body).to_bytes(4, "big") + body)
    return path


def test_nothing_read_is_said_with_what_was_seen_and_where_to_go(inhouse_file: Path) -> None:
    res = runner.invoke(app, ["inspect", str(inhouse_file)])
    assert res.exit_code == 0, res.output
    out = " ".join(res.stdout.split())
    assert "nothing read: no conversation, turn or tool call from 5 span(s)" in out
    assert "span names: acme.step (3), acme.run (2)" in out
    assert "scopes: acme.agentkit (5)" in out
    assert "acme.tool_name (3)" in out
    assert "--suggest-mapping" in out
    assert "1 warning(s)" in out


def test_nothing_read_in_json_lists_what_was_seen(inhouse_file: Path) -> None:
    res = runner.invoke(app, ["inspect", str(inhouse_file), "--format", "json"])
    doc = json.loads(res.stdout)
    assert doc["warning_count"] == 1
    assert doc["seen"]["span_names"] == {"acme.step": 3, "acme.run": 2}
    assert list(doc["seen"]["attribute_keys"])[:1] == ["acme.tool_name"]


def test_strict_exits_1_on_any_warning(inhouse_file: Path) -> None:
    res = runner.invoke(app, ["inspect", "--strict", str(inhouse_file)])
    assert res.exit_code == 1


def test_strict_exits_0_without_warnings() -> None:
    corpus = Path(__file__).resolve().parents[1] / "frameworks" / "corpus"
    res = runner.invoke(app, ["inspect", "--strict", str(corpus / "strands_native.otlp.jsonl")])
    assert res.exit_code == 0, res.output


def test_suggested_mapping_pasted_into_a_config_reads_the_file_right(
    inhouse_file: Path, tmp_path: Path
) -> None:
    res = runner.invoke(app, ["inspect", "--suggest-mapping", str(inhouse_file)])
    assert res.exit_code == 0, res.output
    config = tmp_path / "collector.yaml"
    config.write_text(res.stdout, encoding="utf-8")
    conventions = load_config(config).conventions

    assert conversations_from_otlp([inhouse_file]) == []  # unread without the mapping
    convs = assemble_offline(
        requests_from_otlp([inhouse_file]), normalizer=default_normalizer(custom=conventions)
    )
    assert [c.id for c in convs] == ["sess-42"]
    turns = convs[0].turns
    assert [(t.query, t.answer) for t in turns] == [(q, a) for q, _, a in TURNS]
    for turn, (_, calls, _) in zip(turns, TURNS, strict=True):
        got = sorted(
            (c.name, json.dumps(c.arguments, sort_keys=True), c.result, c.error)
            for c in turn.tool_calls
        )
        want = sorted(
            (n, json.dumps(a, sort_keys=True), None if e else r, e) for n, a, r, e in calls
        )
        assert [(n, a, e) for n, a, _, e in got] == [(n, a, e) for n, a, _, e in want]
        assert [r for *_, r, e in got if e is None] == [r for *_, r, e in want if e is None]
    assert convs[0].agent_name == "travel"

    # …and `inspect --config` with it reads everything, without warnings.
    res = runner.invoke(app, ["inspect", "--strict", "--config", str(config), str(inhouse_file)])
    assert res.exit_code == 0, res.output


def test_a_bad_config_is_exit_2_with_its_location(inhouse_file: Path, tmp_path: Path) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text(
        "conventions:\n  custom:\n    - name: x\n      kind: tool\n      match:\n"
        "        span_name_regex: '(?<=a)b'\n",
        encoding="utf-8",
    )
    res = runner.invoke(app, ["inspect", "--config", str(config), str(inhouse_file)])
    assert res.exit_code == 2
    assert f"{config}:6:9: conventions.custom.0.match.span_name_regex" in res.output


REFERENCES = """\
name: inhouse
references:
  - id: weather
    turns:
      - query: Weather in Paris?
        expected_answer: It is sunny.
        expected_tools:
          - name: get_weather
            arguments: {city: Paris}
"""


def test_evaluate_reads_the_file_with_the_configs_mapping(
    inhouse_file: Path, tmp_path: Path
) -> None:
    """`evaluate --config` reads what `inspect --config` reads (issue 34: an in-house
    agent's file read 4 conversations in `inspect` and 0 in `evaluate`)."""
    suggested = runner.invoke(app, ["inspect", "--suggest-mapping", str(inhouse_file)])
    config = tmp_path / "collector.yaml"
    config.write_text(suggested.stdout, encoding="utf-8")
    refs = tmp_path / "refs.yaml"
    refs.write_text(REFERENCES, encoding="utf-8")
    res = runner.invoke(
        app,
        [
            "evaluate", str(inhouse_file), "--references", str(refs), "--config", str(config),
            "--format", "json", "--no-readiness-gate",
        ],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["summary"]["conversations"] >= 1
    assert "no conversations read" not in res.output


@pytest.mark.parametrize("gate", [["--fail-under", "pass_pow_k@1=0.5"], []])
def test_a_gate_over_nothing_read_fails(
    inhouse_file: Path, tmp_path: Path, gate: list[str]
) -> None:
    refs = tmp_path / "refs.yaml"
    refs.write_text(REFERENCES, encoding="utf-8")
    res = runner.invoke(app, ["evaluate", str(inhouse_file), "--references", str(refs), *gate])
    assert res.exit_code == 1, res.output
    assert f"no conversations read from {inhouse_file}" in " ".join(res.output.split())
    assert "gate PASS" not in res.output
