"""Issue 13 #11: `/metrics` listens where `--host` says (not 0.0.0.0) unless
`metrics.prometheus_host` is set, and takes a bearer token like the API."""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tracepass.collector.config import CollectorConfig
from tracepass.collector.service import CollectorService, with_overrides

pytestmark = pytest.mark.timeout(60)


def _config(tmp_path: Path, **metrics: object) -> CollectorConfig:
    base = CollectorConfig.model_validate(
        {
            "receiver": {"grpc_port": 0, "http_port": 0},
            "metrics": {"prometheus_port": 0, **metrics},
            "state": {"path": str(tmp_path / "s.sqlite"), "durability": "none"},
        }
    )
    return with_overrides(base, host="127.0.0.1")  # what `serve --host 127.0.0.1` does


def _get(url: str, token: str | None = None) -> int:
    request = urllib.request.Request(url)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return exc.code


async def test_metrics_bind_the_receivers_host(tmp_path: Path) -> None:
    service = CollectorService(_config(tmp_path))
    await service.start()
    try:
        assert service.telemetry._httpd.server_address[0] == "127.0.0.1"
        assert service.metrics_url is not None
        assert await asyncio.to_thread(_get, service.metrics_url) == 200
    finally:
        await service.stop()


async def test_explicit_prometheus_host_wins(tmp_path: Path) -> None:
    service = CollectorService(_config(tmp_path, prometheus_host="0.0.0.0"))
    await service.start()
    try:
        assert service.telemetry._httpd.server_address[0] == "0.0.0.0"
    finally:
        await service.stop()


async def test_metrics_bearer_token(tmp_path: Path) -> None:
    service = CollectorService(_config(tmp_path, bearer_token="s3cret"))
    await service.start()
    try:
        url = service.metrics_url
        assert url is not None
        assert await asyncio.to_thread(_get, url) == 401
        assert await asyncio.to_thread(_get, url, "wrong") == 401
        assert await asyncio.to_thread(_get, url, "s3cret") == 200
    finally:
        await service.stop()
