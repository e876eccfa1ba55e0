"""Turning captured Python values into bounded span attribute strings.

Evaluation needs the real queries, answers, arguments and results, so capture is on by
default; the settings here are the user's levers against that (off switch, redaction,
size cap). Everything in this module must never raise into the instrumented program: a
value that cannot be serialized is still worth recording as its `repr`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

_log = logging.getLogger("tracepass.instrumentation")

Redactor = Callable[[str, Any], Any]
"""`redact(key, value) -> new value`; key is the span attribute the value is captured for."""

CAPTURE_ENV: Final = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
DEFAULT_MAX_VALUE_BYTES: Final = 64 * 1024
REDACTION_FAILED: Final = "[tracepass: redaction failed, value withheld]"


@dataclass(frozen=True, slots=True)
class ContentSettings:
    """Immutable so decorators can read one consistent snapshot per call without locks."""

    capture: bool = True
    redact: Redactor | None = None
    max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES


# Boolean spellings, plus the enum the OTel GenAI utilities use for this variable under
# OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental. tracepass writes content only
# on spans, so EVENT_ONLY ("keep content off spans") means off here.
_CAPTURE_OFF: Final = frozenset({"false", "0", "no", "off", "no_content", "event_only"})
_CAPTURE_ON: Final = frozenset({"true", "1", "yes", "on", "span_only", "span_and_event", ""})


def env_allows_capture() -> bool:
    """Only an explicit off value disables capture; unset means on (tracepass's need)."""
    raw = os.environ.get(CAPTURE_ENV)
    if raw is None:
        return True
    value = raw.strip().lower()
    if value in _CAPTURE_OFF:
        return False
    if value not in _CAPTURE_ON:
        _log.warning(
            "%s=%r is not a recognised value (true/false, NO_CONTENT, SPAN_ONLY, "
            "EVENT_ONLY, SPAN_AND_EVENT); content capture stays on",
            CAPTURE_ENV,
            raw,
        )
    return True


# Read once at import (and again by `configure`), never per call: env lookups are
# measurable on the decorator hot path.
SETTINGS: ContentSettings = ContentSettings(capture=env_allows_capture())


def set_settings(settings: ContentSettings) -> None:
    global SETTINGS
    if settings.max_value_bytes < 1:
        raise ValueError(f"max_value_bytes must be >= 1, got {settings.max_value_bytes}")
    SETTINGS = settings


def get_settings() -> ContentSettings:
    return SETTINGS


def _safe_repr(value: Any) -> str:
    try:
        return repr(value)
    except Exception as exc:  # a broken __repr__ must not break the agent
        return f"<unrepresentable {type(value).__qualname__}: {type(exc).__qualname__}>"


def _fallback(value: Any) -> Any:
    """JSON `default=` hook: structured where cheap and safe, `repr` otherwise."""
    if isinstance(value, set | frozenset):
        return list(value)
    dump = getattr(value, "model_dump", None)  # pydantic v2 models, LangChain messages
    if callable(dump):
        try:
            return dump(mode="json")
        except Exception:
            return _safe_repr(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        try:
            return dataclasses.asdict(value)
        except Exception:
            return _safe_repr(value)
    return _safe_repr(value)


# One shared encoder: json.dumps with non-default options builds a new encoder per call.
_ENCODER = json.JSONEncoder(ensure_ascii=False, default=_fallback)
_encode = _ENCODER.encode


def to_json(value: Any) -> str:
    """Serialize to JSON; values JSON cannot express at all become a JSON string of repr."""
    try:
        return _encode(value)
    except Exception:  # circular references, non-string dict keys, exotic __float__ …
        return _encode(_safe_repr(value))


def truncation_marker(total_bytes: int) -> str:
    return f"…[truncated by tracepass: {total_bytes} bytes total]"


def cap(text: str, max_bytes: int) -> tuple[str, bool]:
    """Cut `text` to at most `max_bytes` UTF-8 bytes (on a character boundary) + marker."""
    # A str of n characters is at most 4n UTF-8 bytes: skip encoding for the common case.
    if len(text) * 4 <= max_bytes:
        return text, False
    raw = text.encode("utf-8", "surrogatepass")
    if len(raw) <= max_bytes:
        return text, False
    kept = raw[:max_bytes].decode("utf-8", "ignore")
    return kept + truncation_marker(len(raw)), True


def redact(settings: ContentSettings, key: str, value: Any) -> Any:
    hook = settings.redact
    if hook is None:
        return value
    try:
        return hook(key, value)
    except Exception:
        # Failing open would leak exactly what the hook exists to hide.
        _log.exception("tracepass redact hook failed for %s; value withheld", key)
        return REDACTION_FAILED


def capture_json(
    settings: ContentSettings, key: str, value: Any, truncated: list[str] | None
) -> tuple[str, list[str] | None]:
    """Redact, serialize and cap one value for attribute `key`.

    Returns the attribute string and the (lazily created) list of truncated keys.
    """
    if settings.redact is not None:
        value = redact(settings, key, value)
    text, cut = cap(to_json(value), settings.max_value_bytes)
    if cut:
        truncated = [*truncated, key] if truncated else [key]
    return text, truncated


def as_text(value: Any) -> str:
    """Message content is text: strings pass through, anything else becomes JSON."""
    return value if type(value) is str else to_json(value)


def capture_message(
    settings: ContentSettings,
    key: str,
    role: str,
    value: Any,
    truncated: list[str] | None,
    finish_reason: str | None = None,
) -> tuple[str, list[str] | None]:
    """Build a one-message GenAI semconv message list; the cap applies to the text inside
    so the attribute always stays valid JSON (answers are compared as text downstream)."""
    if settings.redact is not None:
        value = redact(settings, key, value)
    text, cut = cap(as_text(value), settings.max_value_bytes)
    if cut:
        truncated = [*truncated, key] if truncated else [key]
    message: dict[str, Any] = {"role": role, "parts": [{"type": "text", "content": text}]}
    if finish_reason is not None:
        message["finish_reason"] = finish_reason
    return _encode([message]), truncated
