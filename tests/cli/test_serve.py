"""`tracepass serve` input errors (exit 2, precise message) and the service lifecycle
in-process; the full end-to-end run is tests/e2e/test_serve_e2e.py."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tracepass.collector.cli.main import app
from tracepass.collector.config import CollectorConfig, ConfigError, MetricsConfig, ReceiverConfig
from tracepass.collector.service import CollectorService, startup_error, with_overrides

runner = CliRunner()
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_bad_config_field_exit_2(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("receiver:\n  grpc_prot: 1\n")
    res = runner.invoke(app, ["serve", "--config", str(cfg)])
    assert res.exit_code == 2
    assert f"{cfg}: receiver.grpc_prot" in res.output


def test_missing_references_exit_2(tmp_path: Path) -> None:
    res = runner.invoke(app, ["serve", "--references", str(tmp_path / "nope")])
    assert res.exit_code == 2
    assert "no such file or directory (--references)" in res.output


def test_bad_durability_exit_2() -> None:
    res = runner.invoke(app, ["serve", "--durability", "sometimes"])
    assert res.exit_code == 2
    assert "--durability" in res.output


def test_with_overrides_revalidates() -> None:
    cfg = with_overrides(CollectorConfig(), grpc_port=0, http_port=0, durability="none")
    assert (cfg.receiver.grpc_port, cfg.receiver.http_port, cfg.state.durability) == (0, 0, "none")
    with pytest.raises(ConfigError, match=r"state\.durability"):
        with_overrides(CollectorConfig(), durability="sometimes")


def _config(tmp_path: Path, http_port: int = 0) -> CollectorConfig:
    return CollectorConfig(
        references=[EXAMPLES / "references"],
        receiver=ReceiverConfig(host="127.0.0.1", grpc_port=0, http_port=http_port),
        metrics=MetricsConfig(prometheus_host="127.0.0.1", prometheus_port=0),
        state={"path": tmp_path / "s.sqlite", "durability": "none"},  # type: ignore[arg-type]
    )


async def test_service_busy_port_unwinds(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        service = CollectorService(_config(tmp_path, http_port=busy.getsockname()[1]))
        with pytest.raises(OSError, match=r"address|bind|in use") as info:
            await service.start()
        assert startup_error(info.value) is not None
    assert service.telemetry is None  # providers shut down, metrics port closed
    assert service.pipeline is None


async def test_service_start_stop_and_persist(tmp_path: Path) -> None:
    service = CollectorService(_config(tmp_path))
    await service.start()
    ports = service.ports
    assert ports.grpc
    assert ports.http
    assert ports.metrics
    assert service.snapshot() == []
    await service.stop()
    await service.stop()  # idempotent
    await asyncio.sleep(0)
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", ports.http))  # the port is free again
