"""Out-of-descriptor `accept()` failures logged once per interval, not once each.

When the process runs out of file descriptors, asyncio's accept loop reports every
failed `accept()` of a burst to the loop's exception handler, each with a traceback
(hundreds of lines a second); the gRPC attack of issue 21 wrote 145 MB of log in 47 s.
The limits in `fd_budget.py` keep the receivers from getting there; this handler makes
sure that, if something else exhausts the descriptors, the log says so once per
`RateLimitedLog` interval with the number suppressed, and the exporters' retries are
what carries the load (asyncio itself pauses accepting for a second after a failure).
"""

from __future__ import annotations

import asyncio
import errno
import logging
from typing import Any

from tracepass.evaluator.ratelimited_log import RateLimitedLog

__all__ = ["rate_limit_accept_errors"]

_log = RateLimitedLog(logging.getLogger("tracepass.collector.receiver"))
_EXHAUSTED = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
_INSTALLED = "_tracepass_accept_errors"


def rate_limit_accept_errors(loop: asyncio.AbstractEventLoop) -> None:
    """Route the loop's resource-exhaustion accept errors through a rate-limited log;
    every other report goes to the handler that was there (or the default). Idempotent."""
    if getattr(loop, _INSTALLED, False):
        return
    previous = loop.get_exception_handler()

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if (
            isinstance(exc, OSError)
            and exc.errno in _EXHAUSTED
            and "accept" in str(context.get("message", ""))
        ):
            _log.error(
                "accept_exhausted",
                "cannot accept connections: %s (raise the file limit or lower "
                "receiver.max_connections)",
                exc.strerror,
            )
            return
        if previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    loop.set_exception_handler(handler)
    setattr(loop, _INSTALLED, True)
