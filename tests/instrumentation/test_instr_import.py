"""`import tracepass.instrumentation` stays light: agents import it at startup, often in
processes that never use LangChain or gRPC. Checked in a fresh interpreter, by module
names (never by wall time)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY_PREFIXES = (
    "langchain",
    "langgraph",
    "pydantic",
    "grpc",
    "google.protobuf",
    "opentelemetry.exporter",
    "opentelemetry.proto",
    "requests",
    "numpy",
    "tracepass.collector",
    "tracepass.evaluator",
)


@pytest.mark.slow  # starts a process or a server
def test_import_loads_nothing_heavy() -> None:
    code = (
        "import json, sys; import tracepass.instrumentation; print(json.dumps(sorted(sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True
    )
    loaded = json.loads(out.stdout)
    heavy = [m for m in loaded if m.startswith(HEAVY_PREFIXES)]
    assert heavy == []
    assert "tracepass.instrumentation.langchain" not in loaded
