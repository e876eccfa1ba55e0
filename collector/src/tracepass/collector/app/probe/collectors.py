"""Where a probe's evaluations come from: the embedded collector (a `CollectorService`
in this process, on loopback ports) or a running one (`--collector URL`, read through
`GET /api/v1/conversations/{id}` on its HTTP port — the same port takes OTLP/HTTP)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from tracepass.collector.config import (
    AssemblyConfig,
    CollectorConfig,
    EvaluationSettings,
    MetricsConfig,
    ReceiverConfig,
    StateConfig,
)
from tracepass.collector.service import CollectorService

__all__ = ["EmbeddedSource", "RemoteSource", "embedded_config"]


def embedded_config(
    references: Sequence[Path],
    state_dir: Path,
    *,
    grpc_port: int = 0,
    http_port: int = 0,
    allow_command_graders: bool = False,
) -> CollectorConfig:
    """Loopback only, no /metrics, throwaway state; short timeouts since the probe
    knows when it has finished talking."""
    return CollectorConfig(
        references=list(references),
        evaluation=EvaluationSettings(allow_command_graders=allow_command_graders),
        receiver=ReceiverConfig(host="127.0.0.1", grpc_port=grpc_port, http_port=http_port),
        assembly=AssemblyConfig(
            idle_timeout_s=10.0, trace_grace_s=2.0, retention_s=600.0, tick_interval_s=0.1
        ),
        state=StateConfig(path=state_dir / "state.sqlite", durability="none"),
        metrics=MetricsConfig(prometheus_enabled=False, emit_evaluation_events=False),
    )


class EmbeddedSource:
    def __init__(self, service: CollectorService) -> None:
        self.service = service

    async def get(self, conversation_id: str) -> dict[str, Any] | None:
        views = self.service.views
        return None if views is None else views.conversation_view(conversation_id)


class CollectorUnavailable(RuntimeError):
    pass


class RemoteSource:
    def __init__(self, base_url: str, *, bearer_token: str | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.headers = {"Authorization": f"Bearer {bearer_token}"} if bearer_token else {}
        self._session: Any = None

    async def start(self) -> None:
        import aiohttp

        self._session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=10), headers=self.headers
        )
        try:
            async with self._session.get(f"{self.base_url}/readyz") as resp:
                if resp.status != 200:
                    raise CollectorUnavailable(
                        f"--collector {self.base_url}: /readyz answered {resp.status}"
                    )
        except aiohttp.ClientError as exc:
            await self.close()
            raise CollectorUnavailable(f"--collector {self.base_url}: {exc}") from exc

    async def get(self, conversation_id: str) -> dict[str, Any] | None:
        import aiohttp

        assert self._session is not None, "start() first"
        url = f"{self.base_url}/api/v1/conversations/{quote(conversation_id, safe='')}"
        try:
            async with self._session.get(url) as resp:
                if resp.status != 200:
                    return None
                data: dict[str, Any] = json.loads(await resp.text())
                return data
        except (aiohttp.ClientError, TimeoutError, ValueError):
            return None  # polled again until the deadline

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
