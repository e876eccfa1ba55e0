"""Suite-wide fixtures. System tools (promtool, prometheus, chromium) are skipped when
absent locally, but CI sets TRACEPASS_REQUIRE_SYSTEM_TOOLS=1 so their absence fails."""

from __future__ import annotations

import os
import shutil

import pytest


def require_tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        if os.environ.get("TRACEPASS_REQUIRE_SYSTEM_TOOLS") == "1":
            pytest.fail(f"{name} is required in CI but not installed")
        pytest.skip(f"{name} not installed")
    return path
