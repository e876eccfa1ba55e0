"""Why a state file cannot be used at start-up, as a `StateError` naming its path (the
CLI turns it into exit 2 with that message, docs/cli.md).

SQLite reports damaged pages only when they are read, which is during recovery, after
the file opened fine: `sqlite3.DatabaseError` there was an uncaught traceback (exit 1).
A read-only directory failed on the lock file with a bare `OSError`, which the CLI took
for a port it could not bind ("cannot listen").
"""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

from tracepass.collector.state.store import StateError

__all__ = ["unusable_state"]

_READ_ONLY = {errno.EROFS, errno.EACCES, errno.EPERM}


def unusable_state(path: Path, exc: BaseException) -> StateError | None:
    """The error to report for `exc` raised while opening or recovering `path` (None:
    not a state-file problem)."""
    if isinstance(exc, StateError):
        return exc
    if isinstance(exc, sqlite3.DatabaseError):
        return StateError(
            f"{path}: the state file is damaged ({exc}); restore it from a backup, or move "
            "it away to start with an empty state"
        )
    if isinstance(exc, OSError):
        where = exc.filename or path
        if exc.errno in _READ_ONLY:
            return StateError(
                f"{where}: the state directory is not writable ({exc.strerror}); tracepass "
                "needs to create and write its state file, its lock and its WAL there "
                "(state.path, --state)"
            )
        return StateError(f"{where}: cannot open the state file: {exc.strerror or exc}")
    return None
