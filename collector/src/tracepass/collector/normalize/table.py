"""The dispatch tables `normalize_request` walks (see `registry` for their shape).

Conventions, in order (first claim wins): tracepass's end marker, OpenInference,
OpenLLMetry, Haystack's own tracing, the Vercel AI SDK's `ai.*` spans, Langfuse observations, LangSmith's OTel export, Pydantic Logfire's integrations, MLflow's own span attributes, then the GenAI semconv attribute generations. OpenInference and OpenLLMetry
come before GenAI because their spans also carry some `gen_ai.*` attributes. GenAI
content in span events (`genai_events`) is read after whichever convention claimed the
span, for what its attributes did not give. Framework adapters (`adapters/`) correct the
result per instrumentation scope.
"""

from __future__ import annotations

from tracepass.collector.normalize import (
    genai,
    haystack_native,
    langfuse,
    langsmith,
    logfire,
    mlflow_native,
    openinference,
    traceloop,
    tracepass_conv,
    vercel_ai,
)
from tracepass.collector.normalize.adapter_discovery import ADAPTERS
from tracepass.collector.normalize.registry import Adapter, Convention

CONVENTIONS: tuple[Convention, ...] = (
    *tracepass_conv.CONVENTIONS,
    *openinference.CONVENTIONS,
    *traceloop.CONVENTIONS,
    *haystack_native.CONVENTIONS,
    *vercel_ai.CONVENTIONS,
    *langfuse.CONVENTIONS,
    *langsmith.CONVENTIONS,
    *logfire.CONVENTIONS,
    *mlflow_native.CONVENTIONS,
    *genai.CONVENTIONS,
)

# (attribute key, convention) in dispatch order, and span name → convention.
BY_KEY: tuple[tuple[str, Convention], ...] = tuple(
    (key, conv) for conv in CONVENTIONS for key in conv.keys
)
BY_SPAN_NAME: dict[str, Convention] = {
    name: conv for conv in CONVENTIONS for name in conv.span_names
}

_SCOPE_CACHE: dict[str, tuple[Adapter, ...]] = {}
_SCOPE_CACHE_MAX = 4096


def adapters_for_scope(scope_name: str) -> tuple[Adapter, ...]:
    """The adapters that apply to spans of this instrumentation scope (cached: decided
    once per scope name, not per span)."""
    found = _SCOPE_CACHE.get(scope_name)
    if found is None:
        found = tuple(a for a in ADAPTERS if a.matches_scope(scope_name))
        if len(_SCOPE_CACHE) >= _SCOPE_CACHE_MAX:  # hostile scope names: stay bounded
            _SCOPE_CACHE.clear()
        _SCOPE_CACHE[scope_name] = found
    return found
