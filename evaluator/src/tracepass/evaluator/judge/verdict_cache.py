"""SQLite cache of LLM-judge verdicts.

Judging is the slow, paid step of evaluation, and re-evaluating the same answers (a
re-run of `tracepass evaluate`, a collector restart re-scoring stored conversations) is
common. The key is a SHA-256 over the model's identity, the rubric version and every
input the judge sees, so changing any of them misses the cache instead of returning a
stale verdict. Only successful verdicts are stored: an error is worth retrying later.

WAL mode lets several processes (collector replicas on one volume, a CLI run alongside)
read while one writes. Calls are synchronous: a primary-key lookup takes microseconds,
far below the cost of keeping a thread hop per verdict.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

_SCHEMA = """
CREATE TABLE IF NOT EXISTS judge_verdicts (
    key TEXT PRIMARY KEY,
    score REAL NOT NULL,
    reasoning TEXT,
    model_id TEXT NOT NULL,
    rubric_version TEXT NOT NULL,
    created_at REAL NOT NULL
)
"""


def cache_key(model_id: str, rubric_version: str, inputs: dict[str, Any]) -> str:
    """SHA-256 of a canonical JSON encoding (sorted keys, no whitespace variance)."""
    blob = json.dumps(
        {"model": model_id, "rubric": rubric_version, "inputs": inputs},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        default=str,
    )
    return hashlib.sha256(blob.encode()).hexdigest()


class JudgeCache:
    """A verdict store at `path` (":memory:" for a private in-process cache)."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute("PRAGMA busy_timeout=5000")
        self._conn.execute(_SCHEMA)

    def get(self, key: str) -> tuple[float, str | None] | None:
        with self._lock:
            row = self._conn.execute(
                "SELECT score, reasoning FROM judge_verdicts WHERE key = ?", (key,)
            ).fetchone()
        return None if row is None else (float(row[0]), row[1])

    def put(
        self, key: str, score: float, reasoning: str | None, *, model_id: str, rubric_version: str
    ) -> None:
        with self._lock:
            self._conn.execute(
                "INSERT OR REPLACE INTO judge_verdicts VALUES (?, ?, ?, ?, ?, ?)",
                (key, score, reasoning, model_id, rubric_version, time.time()),
            )

    def __len__(self) -> int:
        with self._lock:
            row = self._conn.execute("SELECT COUNT(*) FROM judge_verdicts").fetchone()
        return int(row[0])

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> JudgeCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
