"""Rate-limited logging for messages that repeat once per item (an evicted
conversation, a dropped span, a refused request).

Why: under overload such messages come thousands per second (36,928 eviction warnings
in 60 s of a 3× overload), drown the lines that matter and cost CPU when the collector
can least afford it. Each *kind* of message (its `key`, e.g. the eviction reason, not
the conversation id) is written at most once per interval; the number suppressed in
between rides on the next line of that kind. Exact totals are in the metrics; the log
shows the first example and how many more there were.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

__all__ = ["RateLimitedLog"]


class RateLimitedLog:
    """At most one line per `key` per `interval_s` through `logger`."""

    def __init__(
        self,
        logger: logging.Logger,
        interval_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger = logger
        self.interval_s = interval_s
        self._clock = clock
        self._last: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}
        self._lock = threading.Lock()  # state and assembly also log from worker threads

    def log(self, level: int, key: str, msg: str, *args: object) -> None:
        if not self.logger.isEnabledFor(level):
            return
        now = self._clock()
        with self._lock:
            last = self._last.get(key)
            if last is not None and now - last < self.interval_s:
                self._suppressed[key] = self._suppressed.get(key, 0) + 1
                return
            self._last[key] = now
            n = self._suppressed.pop(key, 0)
        if n:
            msg += " (%d similar messages suppressed in the last %.0f s)"
            args = (*args, n, self.interval_s)
        self.logger.log(level, msg, *args)

    def info(self, key: str, msg: str, *args: object) -> None:
        self.log(logging.INFO, key, msg, *args)

    def warning(self, key: str, msg: str, *args: object) -> None:
        self.log(logging.WARNING, key, msg, *args)

    def error(self, key: str, msg: str, *args: object) -> None:
        self.log(logging.ERROR, key, msg, *args)
