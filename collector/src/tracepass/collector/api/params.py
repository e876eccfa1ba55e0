"""Query-string parsing shared by the read API and the web UI: one set of rules, one
error type naming the bad parameter (answered as 400 by the API, shown by the UI)."""

from __future__ import annotations

import datetime as dt
import math
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from tracepass.collector.state import ResultFilter, decode_cursor
from tracepass.evaluator.models import Outcome

__all__ = [
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "ListQuery",
    "ParamError",
    "check_bounds",
    "format_time",
    "parse_list_query",
    "parse_time",
]

DEFAULT_LIMIT = 50
MAX_LIMIT = 500
MAX_PARAMS = 32
MAX_VALUE_CHARS = 512
_OUTCOMES = frozenset(o.value for o in Outcome)
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
_UNIT_S = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
FILTER_PARAMS = (
    "outcome",
    "agent_name",
    "agent_version",
    "reference_id",
    "reference_set",
    "violation",
    "failure_mode",
    "since",
    "until",
    "min_cost_usd",
    "min_duration_s",
)


class ParamError(ValueError):
    """A query parameter this API cannot use; `parameter` names it."""

    def __init__(self, parameter: str, message: str) -> None:
        super().__init__(f"{parameter}: {message}")
        self.parameter = parameter


def parse_time(parameter: str, text: str, now: Callable[[], float] = time.time) -> float:
    """Epoch seconds from epoch seconds, RFC 3339 (`2026-11-25T14:00:00Z`) or a duration
    back from now (`15m`, `1h`, `7d`)."""
    text = text.strip()
    m = _DURATION.match(text)
    if m:
        return now() - float(m.group(1)) * _UNIT_S[m.group(2)]
    try:
        return float(text)
    except ValueError:
        pass
    try:
        parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ParamError(
            parameter,
            f"{text!r} is not a time (epoch seconds, RFC 3339 or a duration like 1h)",
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return parsed.timestamp()


def format_time(epoch_s: float) -> str:
    """RFC 3339 in UTC with milliseconds: how the API spells every time it returns."""
    moment = dt.datetime.fromtimestamp(epoch_s, tz=dt.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


@dataclass(frozen=True, slots=True)
class ListQuery:
    where: ResultFilter
    limit: int
    cursor: tuple[float, str] | None


def _opt(params: Mapping[str, str], name: str) -> str | None:
    value = params.get(name)
    return value if value else None


def _min_number(params: Mapping[str, str], name: str) -> float | None:
    text = _opt(params, name)
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        raise ParamError(name, f"{text!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise ParamError(name, f"must be a finite number >= 0, got {text!r}")
    return value


def check_bounds(params: Iterable[tuple[str, str]]) -> None:
    """Refuse (400) a query string with more than MAX_PARAMS parameters (repeats
    counted) or a value longer than MAX_VALUE_CHARS: nothing the API or the UI needs
    comes close, and each extra value used to cost a query. A value holding U+0000 is
    refused too: no stored id or name can hold it (PostgreSQL refuses NUL in text; the
    shared store keeps U+FFFD in its place), and a query with it used to answer 500."""
    for count, (name, value) in enumerate(params, start=1):
        if count > MAX_PARAMS:
            raise ParamError(name, f"more than {MAX_PARAMS} query parameters")
        if len(value) > MAX_VALUE_CHARS:
            raise ParamError(name, f"value longer than {MAX_VALUE_CHARS} characters")
        if "\x00" in value or "\x00" in name:
            raise ParamError(name[:64], "a NUL character (U+0000) is not allowed")


def parse_list_query(params: Mapping[str, str], now: Callable[[], float] = time.time) -> ListQuery:
    """The filters of `GET /api/v1/conversations` (empty values mean "any"). `outcome`
    may list several values separated by commas (`fail,error`)."""
    outcomes: list[str] = []
    for part in (params.get("outcome") or "").split(","):
        part = part.strip()
        if not part:
            continue
        if part not in _OUTCOMES:
            raise ParamError("outcome", f"{part!r} is not one of {', '.join(sorted(_OUTCOMES))}")
        if part not in outcomes:  # `fail` 1,500 times is one query, not 1,500
            outcomes.append(part)
    since = _opt(params, "since")
    until = _opt(params, "until")
    raw_limit = _opt(params, "limit")
    limit = DEFAULT_LIMIT
    if raw_limit is not None:
        try:
            limit = int(raw_limit)
        except ValueError:
            raise ParamError("limit", f"{raw_limit!r} is not an integer") from None
        if not 1 <= limit <= MAX_LIMIT:
            raise ParamError("limit", f"must be between 1 and {MAX_LIMIT}, got {limit}")
    raw_cursor = _opt(params, "cursor")
    try:
        cursor = None if raw_cursor is None else decode_cursor(raw_cursor)
    except ValueError as exc:
        raise ParamError("cursor", str(exc)) from None
    return ListQuery(
        where=ResultFilter(
            outcomes=tuple(outcomes),
            agent_name=_opt(params, "agent_name"),
            agent_version=_opt(params, "agent_version"),
            reference_id=_opt(params, "reference_id"),
            reference_set=_opt(params, "reference_set"),
            violation=_opt(params, "violation"),
            failure_mode=_opt(params, "failure_mode"),
            since=None if since is None else parse_time("since", since, now),
            until=None if until is None else parse_time("until", until, now),
            min_cost_usd=_min_number(params, "min_cost_usd"),
            min_duration_s=_min_number(params, "min_duration_s"),
        ),
        limit=limit,
        cursor=cursor,
    )
