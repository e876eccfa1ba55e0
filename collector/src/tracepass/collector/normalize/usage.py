"""Token counts, provider and timing problems of a model-call span, read once at ingest.

Only MODEL records are read (whichever convention claimed the span): agent and chain
spans of several frameworks repeat the sum of their model calls' tokens (Strands'
`invoke_agent`, smolagents' agent span, ADK's `call_llm` around `generate_content`), and
counting them too would double the totals.

Each count is looked up under the names the conventions used over time, first present
wins (the current OTel GenAI name first):

| count | attribute names |
|---|---|
| input | `gen_ai.usage.input_tokens`, `gen_ai.usage.prompt_tokens` (GenAI ≤ 1.26, OpenLLMetry), `llm.token_count.prompt` (OpenInference), `llm.usage.prompt_tokens` |
| output | `gen_ai.usage.output_tokens`, `gen_ai.usage.completion_tokens`, `llm.token_count.completion`, `llm.usage.completion_tokens` |
| cached input | `gen_ai.usage.cache_read.input_tokens`, `gen_ai.usage.cache_read_input_tokens` (OpenLLMetry), `llm.token_count.prompt_details.cache_read`, `llm.usage.cache_read_input_tokens` |
| reasoning | `gen_ai.usage.reasoning.output_tokens`, `gen_ai.usage.reasoning_tokens` (OpenLLMetry), `llm.token_count.completion_details.reasoning`, `llm.usage.reasoning_tokens` |
| cache write input | `gen_ai.usage.cache_creation.input_tokens`, `gen_ai.usage.cache_creation_input_tokens`, `gen_ai.usage.cache_write_input_tokens` (Strands, older), `llm.token_count.prompt_details.cache_write` (OpenInference), `llm.usage.cache_creation_input_tokens` |
| cost (USD) | `gen_ai.usage.cost.amount` (proposed GenAI name, with `gen_ai.usage.cost.currency`: only `USD` is read), `gen_ai.usage.cost.total`, `gen_ai.usage.cost` (OpenLIT, Langfuse), `gen_ai.usage.cost_usd`, `llm.cost.total` (OpenInference), `response_cost` inside LiteLLM's `hidden_params` JSON |
| provider | `gen_ai.provider.name`, `gen_ai.system`, `llm.provider`, `llm.system` |

A cost the span carries is the gateway's or provider's own figure: assembly prefers it to
local prices (`assembly/timeline.py`, `cost_source: "span"`). It must be a finite
non-negative number below `_MAX_COST_USD`; anything else is a `problem` like a bad count.

A count that is not a non-negative integer (negative, fractional, text, a bool) is not
used: the record keeps None for it and `problem` says which and why, so the API shows
the count as missing with its reason, and the collector counts it
(`tracepass_fields_unreadable_total{field="token_count"}`). The model name stays in
the record's kept attributes (`gen_ai.response.model`, `gen_ai.request.model`,
`llm.model_name`), read by `model_of`.
"""

from __future__ import annotations

import json
from typing import Any, Final

from tracepass.collector.records import ModelUsage
from tracepass.instrumentation import semconv as sc

__all__ = [
    "CACHE_WRITE_KEYS",
    "COST_KEYS",
    "INPUT_KEYS",
    "MAX_SPAN_DURATION_NS",
    "model_of",
    "read_usage",
    "timing_problem",
]

INPUT_KEYS: Final = (
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.prompt_tokens",
    "llm.token_count.prompt",
    "llm.usage.prompt_tokens",
)
OUTPUT_KEYS: Final = (
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.completion_tokens",
    "llm.token_count.completion",
    "llm.usage.completion_tokens",
)
CACHED_KEYS: Final = (
    "gen_ai.usage.cache_read.input_tokens",
    "gen_ai.usage.cache_read_input_tokens",
    "llm.token_count.prompt_details.cache_read",
    "llm.usage.cache_read_input_tokens",
)
REASONING_KEYS: Final = (
    "gen_ai.usage.reasoning.output_tokens",
    "gen_ai.usage.reasoning_tokens",
    "llm.token_count.completion_details.reasoning",
    "llm.usage.reasoning_tokens",
)
CACHE_WRITE_KEYS: Final = (
    "gen_ai.usage.cache_creation.input_tokens",
    "gen_ai.usage.cache_creation_input_tokens",
    "gen_ai.usage.cache_write_input_tokens",
    "llm.token_count.prompt_details.cache_write",
    "llm.usage.cache_creation_input_tokens",
)
COST_KEYS: Final = (
    "gen_ai.usage.cost.amount",
    "gen_ai.usage.cost.total",
    "gen_ai.usage.cost",
    "gen_ai.usage.cost_usd",
    "llm.cost.total",
)
# The proposed GenAI currency of `gen_ai.usage.cost.amount` (ISO 4217); only USD is read.
COST_CURRENCY_KEY: Final = "gen_ai.usage.cost.currency"
# LiteLLM writes its computed cost inside a JSON attribute; read only when short.
_LITELLM_PARAMS: Final = "hidden_params"
_MAX_PARAMS_CHARS: Final = 16_384
PROVIDER_KEYS: Final = ("gen_ai.provider.name", "gen_ai.system", "llm.provider", "llm.system")
# Kept attributes naming the model, most specific first (the response's model is the one
# that answered, e.g. a dated snapshot of the requested alias).
MODEL_KEYS: Final = (sc.RESPONSE_MODEL, sc.REQUEST_MODEL, "llm.model_name")

# A span longer than this (a year) is a clock or encoding error, not an agent step.
MAX_SPAN_DURATION_NS: Final = 366 * 86_400 * 10**9
# Counts above this (10^12 tokens) are not a model call's either.
_MAX_TOKENS: Final = 10**12
# A single model call costing this much (USD) is an encoding error, not a price.
_MAX_COST_USD: Final = 1e6

_FIELDS: Final = (
    ("input_tokens", INPUT_KEYS),
    ("output_tokens", OUTPUT_KEYS),
    ("cached_input_tokens", CACHED_KEYS),
    ("reasoning_tokens", REASONING_KEYS),
    ("cache_write_input_tokens", CACHE_WRITE_KEYS),
)


def _count(value: Any) -> tuple[int | None, str | None]:
    """A token count from an attribute value, or why it is not one."""
    cls = value.__class__
    if cls is int:
        if value < 0:
            return None, f"negative ({value})"
        if value > _MAX_TOKENS:
            return None, f"implausible ({value})"
        return value, None
    if cls is float:
        if value != value or value in (float("inf"), float("-inf")):
            return None, "not a number"
        if not value.is_integer():
            return None, f"fractional ({value})"
        return _count(int(value))
    if cls is str:
        text = value.strip()
        if text.lstrip("-").isdigit():
            return _count(int(text))
        return None, f"not a number ({text[:20]!r})"
    return None, f"not a number ({cls.__name__})"


def _first(get: Any, keys: tuple[str, ...]) -> Any:
    for key in keys:
        value = get(key)
        if value is not None:
            return value
    return None


def _cost(value: Any) -> tuple[float | None, str | None]:
    """A cost in USD from an attribute value, or why it is not one."""
    cls = value.__class__
    if cls is str:
        try:
            value = float(value.strip())
        except ValueError:
            return None, f"not a number ({value.strip()[:20]!r})"
        cls = float
    if cls is not int and cls is not float:
        return None, f"not a number ({cls.__name__})"
    if value != value or value in (float("inf"), float("-inf")):
        return None, "not a number"
    if value < 0:
        return None, f"negative ({value})"
    if value > _MAX_COST_USD:
        return None, f"implausible ({value})"
    return float(value), None


def _span_cost(get: Any) -> Any:
    """The raw cost value a span carries (see the module doc), None without one."""
    value = _first(get, COST_KEYS)
    if value is not None:
        return value
    params = get(_LITELLM_PARAMS)
    # Most LiteLLM spans say `"response_cost": null`: no JSON parse for those.
    if (
        params.__class__ is str
        and len(params) <= _MAX_PARAMS_CHARS
        and '"response_cost"' in params
        and '"response_cost": null' not in params
    ):
        try:
            parsed = json.loads(params)
        except ValueError:
            return None
        if isinstance(parsed, dict):
            return parsed.get("response_cost")
    return None


_INPUT, _OUTPUT = INPUT_KEYS[0], OUTPUT_KEYS[0]
_CACHED, _REASONING, _PROVIDER = CACHED_KEYS[0], REASONING_KEYS[0], PROVIDER_KEYS[0]
_OLDER_CACHED, _OLDER_REASONING, _OLDER_PROVIDER = (
    CACHED_KEYS[1:],
    REASONING_KEYS[1:],
    PROVIDER_KEYS[1:],
)


def read_usage(attrs: dict[str, Any]) -> ModelUsage | None:
    """The usage of a MODEL span's attributes; None when it carries no count or provider
    (most spans of stacks without usage: no object per record then).

    Written for the ingest hot path: the current GenAI names with plain int counts (the
    common case) are read with a few dict lookups and no intermediate objects; anything
    else (older names, text or bad values) takes the general reading."""
    get = attrs.get
    i = get(_INPUT)
    o = get(_OUTPUT)
    if (
        i.__class__ is int
        and o.__class__ is int
        and 0 <= i <= _MAX_TOKENS
        and 0 <= o <= _MAX_TOKENS
    ):
        c = get(_CACHED)
        if c is None:
            c = _first(get, _OLDER_CACHED)
        r = get(_REASONING)
        if r is None:
            r = _first(get, _OLDER_REASONING)
        if (c is None or (c.__class__ is int and 0 <= c <= _MAX_TOKENS)) and (
            r is None or (r.__class__ is int and 0 <= r <= _MAX_TOKENS)
        ):
            w = _first(get, CACHE_WRITE_KEYS)
            cost = _span_cost(get)
            if (
                (w is None or (w.__class__ is int and 0 <= w <= _MAX_TOKENS))
                and (cost is None or (cost.__class__ is float and 0 <= cost <= _MAX_COST_USD))
                and get(COST_CURRENCY_KEY) is None
            ):
                p = get(_PROVIDER)
                if p is None:
                    p = _first(get, _OLDER_PROVIDER)
                return ModelUsage(
                    i, o, c, r, p if p.__class__ is str and p else None, None, w, cost
                )
    return _read_usage_general(get)


def _read_usage_general(get: Any) -> ModelUsage | None:
    found: dict[str, int | None] = {}
    problems: list[str] = []
    for name, keys in _FIELDS:
        value = _first(get, keys)
        if value is not None:
            count, problem = _count(value)
            found[name] = count
            if problem is not None:
                problems.append(f"{name}: {problem}")
    cost: float | None = None
    raw_cost = _span_cost(get)
    if raw_cost is not None:
        cost, problem = _cost(raw_cost)
        currency = get(COST_CURRENCY_KEY)
        if currency is not None and currency != "USD":
            cost, problem = None, f"currency {str(currency)[:12]!r} is not USD"
        if problem is not None:
            problems.append(f"span_cost_usd: {problem}")
    provider: str | None = None
    for key in PROVIDER_KEYS:
        value = get(key)
        if value.__class__ is str and value:
            provider = value
            break
    if not found and provider is None and raw_cost is None:
        return None
    return ModelUsage(
        found.get("input_tokens"),
        found.get("output_tokens"),
        found.get("cached_input_tokens"),
        found.get("reasoning_tokens"),
        provider,
        "; ".join(problems) if problems else None,
        found.get("cache_write_input_tokens"),
        cost,
    )


def model_of(attributes: dict[str, Any]) -> str | None:
    """The model a MODEL record's kept attributes name (see `MODEL_KEYS`)."""
    for key in MODEL_KEYS:
        value = attributes.get(key)
        if value.__class__ is str and value:
            return value
    return None


def timing_problem(start_ns: int, end_ns: int) -> str | None:
    """Why a span's start/end give no duration (unset, end before start, over a year)."""
    if start_ns <= 0 or end_ns <= 0:
        return "start or end time missing"
    if end_ns < start_ns:
        return "ends before it starts"
    if end_ns - start_ns > MAX_SPAN_DURATION_NS:
        return "longer than a year"
    return None
