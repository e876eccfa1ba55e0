"""Recording traces to a file (`configure(record_to=...)`, TRACEPASS_RECORD_FILE) and the
extras message when an OTLP exporter is not installed.

Each case runs the instrumented agent in a fresh process (the global tracer provider can
be set once per process) and reads the file back with the real `tracepass` CLI, the way a
user gating CI on recorded traces does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # starts a process or a server

AGENT = textwrap.dedent(
    """
    import sys
    from tracepass.instrumentation import agent, configure, conversation, shutdown, tool

    kwargs = eval(sys.argv[1])
    configure(service_name="rec", **kwargs)

    @tool
    def lookup(city: str) -> dict:
        return {"city": city, "temp": 7}

    @agent(name="travel", version="3")
    def travel(question: str) -> str:
        return "It is %d" % lookup("Bergen")["temp"]

    for n in range(3):
        with conversation(f"rec-{n}", reference_id="rec-ref"):
            travel("Weather in Bergen?")
    shutdown()
    """
)
TRACEPASS = Path(sys.executable).with_name("tracepass")


def _run_agent(kwargs: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", AGENT, kwargs],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
        check=False,
    )


def _conversations(path: Path) -> list[dict[str, object]]:
    out = subprocess.run(
        [str(TRACEPASS), "conversations", str(path), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    document = json.loads(out.stdout)
    return list(document["conversations"] if isinstance(document, dict) else document)


def _check_recorded(path: Path) -> None:
    lines = path.read_text().splitlines()
    assert lines, "nothing recorded"
    first = json.loads(lines[0])
    span = first["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert len(span["traceId"]) == 32
    assert int(span["traceId"], 16) >= 0
    assert len(span["spanId"]) == 16
    conversations = _conversations(path)
    ids = sorted(str(c["conversation_id"]) for c in conversations)
    assert ids == ["rec-0", "rec-1", "rec-2"]
    for conversation in conversations:
        turns = conversation["turns"]
        assert isinstance(turns, list)
        assert len(turns) == 1
        (call,) = turns[0]["tool_calls"]
        assert call["name"] == "lookup"
        assert call["arguments"] == {"city": "Bergen"}


def test_configure_record_to_writes_otlp_json_lines_that_tracepass_reads(tmp_path: Path) -> None:
    path = tmp_path / "out" / "traces.jsonl"
    # No collector here: the standard switch turns the network exporter off.
    result = _run_agent(f"dict(record_to={str(path)!r})", env={"OTEL_TRACES_EXPORTER": "none"})
    assert result.returncode == 0, result.stderr
    _check_recorded(path)


def test_record_file_environment_variable(tmp_path: Path) -> None:
    path = tmp_path / "env.jsonl"
    # Recording comes in addition to the app's own exporter.
    console = (
        "__import__('opentelemetry.sdk.trace.export', fromlist=['x'])"
        ".ConsoleSpanExporter(out=open(__import__('os').devnull, 'w'))"
    )
    result = _run_agent(f"dict(exporter={console})", env={"TRACEPASS_RECORD_FILE": str(path)})
    assert result.returncode == 0, result.stderr
    _check_recorded(path)


@pytest.mark.parametrize(
    ("protocol", "module", "extra"),
    [
        ("http/protobuf", "opentelemetry.exporter.otlp.proto.http.trace_exporter", "otlp-http"),
        ("grpc", "opentelemetry.exporter.otlp.proto.grpc.trace_exporter", "otlp-grpc"),
    ],
)
def test_missing_exporter_names_the_extra(protocol: str, module: str, extra: str) -> None:
    script = textwrap.dedent(
        f"""
        import sys
        sys.modules[{module!r}] = None  # as if the extra were not installed
        from tracepass.instrumentation import configure
        try:
            configure(service_name="x", protocol={protocol!r})
        except ImportError as exc:
            print(exc)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=True
    )
    assert f"tracepass-instrumentation[{extra}]" in out.stdout
