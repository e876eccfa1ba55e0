"""How much of a `serve --record` recording is kept: `receiver.record_max_bytes` (all
files together) and `receiver.record_max_age_s` (a file's last write).

Why: a recording left running has no end; before these limits it grew until the disk
was full, and a full disk then failed the very exports it recorded. Files are the
unit: the oldest closed files are deleted first (like log rotation), the file being
written never is (it is rotated first once it is `max_age_s` old, so it can go later).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

__all__ = ["enforce_retention", "recorded_files"]

log = logging.getLogger("tracepass.collector.receiver.recording")


def recorded_files(directory: Path) -> list[Path]:
    """The recording's files, oldest (lowest number) first."""
    return sorted(directory.glob("traces-*.binpb"))


def enforce_retention(
    directory: Path,
    current: Path | None,
    *,
    max_bytes: int | None,
    max_age_s: float | None,
    incoming: int = 0,
    now: float | None = None,
) -> int:
    """Delete the oldest closed files until the recording (plus `incoming` bytes about
    to be written) fits `max_bytes` and none is older than `max_age_s`; returns the
    bytes the recording holds afterwards (`incoming` included)."""
    now = time.time() if now is None else now
    files: list[tuple[Path, int, float]] = []
    for path in recorded_files(directory):
        try:
            st = path.stat()
        except FileNotFoundError:
            continue
        files.append((path, st.st_size, st.st_mtime))
    total = sum(size for _, size, _ in files) + incoming
    for path, size, mtime in files:
        if path == current:
            continue
        too_big = max_bytes is not None and total > max_bytes
        too_old = max_age_s is not None and now - mtime > max_age_s
        if not (too_big or too_old):
            continue
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.warning("cannot delete old recording file %s: %s", path, exc.strerror)
            continue
        total -= size
        log.info(
            "deleted recording file %s (%s)",
            path,
            "receiver.record_max_bytes" if too_big else "receiver.record_max_age_s",
        )
    return total
