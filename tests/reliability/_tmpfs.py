"""A tmpfs of a test's own, for the reliability tests that need a filesystem they can
fill up or make read-only. Mounting needs root: where it cannot be mounted the test is
skipped, saying why, rather than failing on machines that cannot run it."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def tmpfs(mountpoint: Path, options: str, what: str) -> Iterator[Path]:
    """Create `mountpoint` and mount a tmpfs there with `options` (`size=8m`,
    `ro,size=1m`); unmounted (lazily) on exit. `what` names it in the skip reason."""
    mountpoint.mkdir()
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(mountpoint)],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"cannot mount {what}: {exc}")
    if done.returncode != 0:
        pytest.skip(f"cannot mount {what}: {done.stderr.strip()}")
    try:
        yield mountpoint
    finally:
        subprocess.run(["umount", "-l", str(mountpoint)], check=False, timeout=30)


def small_filesystem(mountpoint: Path, size: str = "8m") -> contextlib.AbstractContextManager[Path]:
    """A filesystem of `size` to fill up (the disk-full tests)."""
    return tmpfs(mountpoint, f"size={size}", "a small tmpfs for the disk-full test")
