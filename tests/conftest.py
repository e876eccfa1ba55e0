"""Suite-wide fixtures. System tools (promtool, prometheus, chromium) are skipped when
absent locally, but CI sets TRACEPASS_REQUIRE_SYSTEM_TOOLS=1 so their absence fails."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest


def require_tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        if os.environ.get("TRACEPASS_REQUIRE_SYSTEM_TOOLS") == "1":
            pytest.fail(f"{name} is required in CI but not installed")
        pytest.skip(f"{name} not installed")
    return path


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[Any]:
    """A throw-away PostgreSQL cluster for the session (tests/postgres_support.py); each
    test takes its own database from it (`create_database`)."""
    from postgres_support import postgres_cluster_running

    with postgres_cluster_running() as cluster:
        yield cluster


@pytest.fixture
def postgres_url(postgres_cluster: Any, request: pytest.FixtureRequest) -> str:
    """A fresh, empty database in the session's cluster."""
    import re

    name = "t_" + re.sub(r"[^a-z0-9]+", "_", request.node.name.lower())[:40]
    name += f"_{abs(hash(request.node.nodeid)) % 10**8}"
    return str(postgres_cluster.create_database(name))
