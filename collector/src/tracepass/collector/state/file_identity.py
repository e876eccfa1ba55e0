"""Notice when the state file is deleted or replaced under a running collector.

SQLite keeps writing to the file it opened: once the path is unlinked (a clean-up job,
an operator's `rm`) or another file is moved into its place, every commit lands in an
inode nobody can open again. Before this check, ingest kept answering 200 and `/readyz`
kept saying ready, and after a restart 0 of 20 acknowledged results were there:
acknowledged data lost with no warning. `FileIdentity` remembers the file's device and
inode at open; `problem()` compares them with what the path names now (one `stat`, a
few microseconds, at most every `interval_s`). The pipeline refuses ingest (retryable
503, so exporters keep their data) and `/readyz` answers 503 with the reason until the
collector is restarted on a file it can keep.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["FileIdentity"]

log = logging.getLogger("tracepass.collector.state")


class FileIdentity:
    def __init__(
        self,
        path: Path,
        *,
        interval_s: float = 0.05,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = path
        st = os.stat(path)
        self._identity = (st.st_dev, st.st_ino)
        self._interval_s = interval_s
        self._clock = clock
        self._checked_at = -1e18
        self._problem: str | None = None

    def problem(self) -> str | None:
        """None while the path still names the file opened; else why it does not (once
        seen, kept: a file put back later is still not the one written meanwhile)."""
        if self._problem is not None:
            return self._problem
        now = self._clock()
        if now - self._checked_at < self._interval_s:
            return None
        self._checked_at = now
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self._problem = f"state file {self.path} was deleted while in use"
        except OSError as exc:
            self._problem = f"state file {self.path} cannot be checked: {exc.strerror}"
        else:
            if (st.st_dev, st.st_ino) != self._identity:
                self._problem = f"state file {self.path} was replaced by another file while in use"
        if self._problem is not None:
            log.error("%s: refusing ingest (503) until restarted", self._problem)
        return self._problem
