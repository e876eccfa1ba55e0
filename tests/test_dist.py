"""The three distributions build, pass `twine check`, and install from their wheels alone.

What a user without a checkout gets: wheels built the `uv build` way, installed into a
clean virtual environment (no workspace, no dev dependencies), where the CLI starts and
the instrumentation imports. The instrumentation wheel alone brings only the
OpenTelemetry API and SDK; its exporters are extras.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
UV = ROOT / ".tools" / "bin" / "uv"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not UV.exists(), reason="uv is bootstrapped by `make setup`"),
]


def _run(*args: str | Path, cwd: Path = ROOT) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_PROJECT", "VIRTUAL_ENV"))}
    out = subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        check=False,
    )
    assert out.returncode == 0, f"{args}: {out.stdout}\n{out.stderr}"
    return out.stdout


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    _run(UV, "build", "--all-packages", "--out-dir", out)
    built = sorted(p for p in out.iterdir() if p.name.endswith((".whl", ".tar.gz")))
    files = [p.name for p in built]
    for name in ("tracepass_instrumentation", "tracepass_evaluator", "tracepass_collector"):
        assert any(f.startswith(name) and f.endswith(".whl") for f in files), files
        assert any(f.startswith(name) and f.endswith(".tar.gz") for f in files), files
    twine = Path(sys.executable).with_name("twine")
    _run(twine, "check", "--strict", *built)
    return out


def _venv(path: Path) -> Path:
    _run(UV, "venv", "--python", sys.executable, path)
    return path / "bin" / "python"


def _wheel(dist: Path, name: str) -> Path:
    (wheel,) = dist.glob(f"{name}-*.whl")
    return wheel


def test_collector_wheels_install_in_a_clean_venv(dist: Path, tmp_path: Path) -> None:
    python = _venv(tmp_path / "venv")
    wheels = [_wheel(dist, n) for n in ("tracepass_instrumentation", "tracepass_evaluator")]
    collector = f"{_wheel(dist, 'tracepass_collector')}[report]"
    _run(UV, "pip", "install", "--python", python, *wheels, collector)
    tracepass = python.with_name("tracepass")
    version = _run(tracepass, "--version")
    for name in ("tracepass-collector", "tracepass-evaluator", "tracepass-instrumentation"):
        assert name in version
    assert "--grpc-port" in _run(tracepass, "serve", "--help")
    _run(python, "-c", "import tracepass.instrumentation, tracepass.evaluator")

    # The demo finds its example agent and references in the wheel (no checkout here).
    report = tmp_path / "demo.html"
    _run(
        tracepass,
        "demo",
        "--duration",
        "4",
        "--no-live",
        "--grpc-port",
        "0",
        "--http-port",
        "0",
        "--metrics-port",
        "0",
        "--report",
        report,
        cwd=tmp_path,
    )
    assert report.stat().st_size > 0


def test_instrumentation_wheel_alone_needs_only_api_and_sdk(dist: Path, tmp_path: Path) -> None:
    python = _venv(tmp_path / "venv")
    _run(UV, "pip", "install", "--python", python, _wheel(dist, "tracepass_instrumentation"))
    installed = _run(UV, "pip", "list", "--python", python).lower()
    assert "opentelemetry-sdk" in installed
    assert "opentelemetry-exporter-otlp" not in installed
    assert "grpcio" not in installed
    message = _run(
        python,
        "-c",
        "from tracepass.instrumentation import configure\n"
        "try:\n    configure(service_name='x')\n"
        "except ImportError as exc:\n    print(exc)\n",
    )
    assert "tracepass-instrumentation[otlp-http]" in message


def test_collector_wheel_ships_the_web_ui_templates(dist: Path) -> None:
    """The UI is rendered from package data: no template may be left out of the wheel."""
    import zipfile

    src = ROOT / "collector" / "src" / "tracepass" / "collector" / "api" / "ui" / "templates"
    expected = {p.name for p in src.glob("*.html.j2")}
    with zipfile.ZipFile(_wheel(dist, "tracepass_collector")) as wheel:
        shipped = {
            Path(n).name
            for n in wheel.namelist()
            if n.startswith("tracepass/collector/api/ui/templates/")
        }
    assert expected
    assert shipped == expected


def test_collector_wheel_ships_the_runbook(dist: Path) -> None:
    """/ui/runbook renders docs/operations.md from package data (alerts link there)."""
    import zipfile

    with zipfile.ZipFile(_wheel(dist, "tracepass_collector")) as wheel:
        shipped = wheel.read("tracepass/collector/api/ui/bundled/operations.md")
    assert shipped == (ROOT / "docs" / "operations.md").read_bytes()
