"""Malformed HTTP requests logged once per interval, in one line, not a traceback each.

aiohttp answers a request its parser refuses (a request line or header over 8190 bytes,
bytes that are not HTTP) with 400, and logs the parser's exception with a full
traceback at ERROR through the `aiohttp.server` logger: about 1 KB per request, so any
client could fill the disk or, with the log on an undrained pipe, block the process on
a write. Found by the seeded query fuzz (tests/reliability/test_fuzz_query_api.py).
This filter drops those records and says what happened through a `RateLimitedLog`
(one line per kind per interval, with the number suppressed); every other record of
that logger passes unchanged."""

from __future__ import annotations

import logging

from aiohttp.http_exceptions import HttpProcessingError

from tracepass.evaluator.ratelimited_log import RateLimitedLog

__all__ = ["install_bad_request_filter"]

_SERVER_LOGGER = "aiohttp.server"
_log = RateLimitedLog(logging.getLogger("tracepass.collector.receiver"))


class _BadRequestFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if not isinstance(exc, HttpProcessingError):
            return True
        kind = type(exc).__name__
        message = str(exc.message if isinstance(exc.message, str) else kind)
        _log.log(
            logging.WARNING,
            f"bad-http:{kind}",
            "malformed HTTP request refused with %s (%s): %s",
            exc.code,
            kind,
            message.splitlines()[0][:200] if message else kind,
        )
        return False


_FILTER = _BadRequestFilter()


def install_bad_request_filter() -> None:
    """Idempotent: the filter is one object, added once."""
    logger = logging.getLogger(_SERVER_LOGGER)
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
