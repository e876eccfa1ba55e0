"""What a model call cost in USD: configured prices first, then the `genai-prices` library.

Why a price library and not a table of our own: model prices change every few weeks and
differ by provider, date and (for some models) prompt size; `genai-prices` (maintained by
Pydantic, data shipped inside the package, no network at run time) knows the history,
the providers' model-name aliases, cached-input rates and tiered prices. See
docs/cost-latency.md for why it was chosen over `tokencost` and litellm's price map.

The rules every caller (the collector's conversation costs, the judge's own spend,
`tracepass evaluate`) gets from here:

* A model named in `pricing.models` uses those rates (they win over the library, so an
  operator can price a fine-tuned or self-hosted model, or correct a rate).
* A model neither configured nor known to the library has no cost: `None` with the
  reason `unknown_model`, never a guessed rate.
* Token counts follow the OTel GenAI conventions: `input_tokens` includes the cached
  input tokens and `output_tokens` includes the reasoning tokens. A count that breaks
  this (cached > input, reasoning > output) or is negative is `invalid_usage`: no cost.
* Missing input or output tokens → `missing_tokens` (a cost from half the counts would
  be a guess too).

`cost_usd(model, usage)` is the small function for callers that only want the number
(the judge budget); `PriceBook.price` also says why there is none.
"""

from __future__ import annotations

import math
import threading
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field

from tracepass.evaluator.bounded_cache import BoundedCache, note_evictions

__all__ = [
    "INVALID_USAGE",
    "MAX_MODEL_CHARS",
    "MISSING_MODEL",
    "MISSING_TOKENS",
    "UNKNOWN_MODEL",
    "ModelPrice",
    "PriceBook",
    "Priced",
    "TokenUsage",
    "cost_usd",
    "library_provider",
]

# Why a model call has no cost (the `reason` of `Priced`; metric label values).
MISSING_MODEL: Final = "missing_model"
MISSING_TOKENS: Final = "missing_tokens"
INVALID_USAGE: Final = "invalid_usage"
UNKNOWN_MODEL: Final = "unknown_model"

# Where a price came from.
SOURCE_CONFIG: Final = "config"
SOURCE_LIBRARY: Final = "genai-prices"

_PER_MTOK: Final = 1_000_000.0


class ModelPrice(BaseModel):
    """One model's rates in USD per million tokens (`pricing.models.<name>` in the config).

    `cached_input_per_mtok` defaults to the input rate and `reasoning_per_mtok` to the
    output rate: providers that bill them differently say so in their price list, and an
    operator who omits them gets the dearer (never an invented cheaper) figure.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    input_per_mtok: float = Field(ge=0, allow_inf_nan=False)
    output_per_mtok: float = Field(ge=0, allow_inf_nan=False)
    cached_input_per_mtok: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    reasoning_per_mtok: float | None = Field(default=None, ge=0, allow_inf_nan=False)

    def cost(self, usage: TokenUsage) -> float:
        """USD for a valid, complete `usage` (see `PriceBook.price` for the checks)."""
        input_tokens = usage.input_tokens or 0
        output_tokens = usage.output_tokens or 0
        cached = usage.cached_input_tokens or 0
        reasoning = usage.reasoning_tokens or 0
        cached_rate = (
            self.input_per_mtok
            if self.cached_input_per_mtok is None
            else self.cached_input_per_mtok
        )
        reasoning_rate = (
            self.output_per_mtok if self.reasoning_per_mtok is None else self.reasoning_per_mtok
        )
        return (
            (input_tokens - cached) * self.input_per_mtok
            + cached * cached_rate
            + (output_tokens - reasoning) * self.output_per_mtok
            + reasoning * reasoning_rate
        ) / _PER_MTOK


@dataclass(frozen=True, slots=True)
class TokenUsage:
    """One model call's token counts (None: the span did not carry that count).

    OTel GenAI semantics: `input_tokens` includes `cached_input_tokens`, and
    `output_tokens` includes `reasoning_tokens`.
    """

    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_input_tokens: int | None = None
    reasoning_tokens: int | None = None

    def problem(self) -> str | None:
        """Why these counts cannot be priced (`INVALID_USAGE` / `MISSING_TOKENS`), or None."""
        for value in (
            self.input_tokens,
            self.output_tokens,
            self.cached_input_tokens,
            self.reasoning_tokens,
        ):
            if value is not None and (value.__class__ is not int or value < 0):
                return INVALID_USAGE
        if self.input_tokens is None or self.output_tokens is None:
            return MISSING_TOKENS
        if self.cached_input_tokens is not None and self.cached_input_tokens > self.input_tokens:
            return INVALID_USAGE
        if self.reasoning_tokens is not None and self.reasoning_tokens > self.output_tokens:
            return INVALID_USAGE
        return None


@dataclass(frozen=True, slots=True)
class Priced:
    """A model call's cost, or why it has none (`reason`), and where the rates came from."""

    cost_usd: float | None
    reason: str | None = None
    source: str | None = None


# OTel `gen_ai.provider.name` (and older `gen_ai.system`) values → genai-prices provider
# ids, where they differ. A provider the library does not know is not passed: the model
# name alone is looked up then (the library's own model matching), never a guess.
_PROVIDER_IDS: Final[Mapping[str, str]] = {
    "gcp.gemini": "google",
    "gcp.vertex_ai": "google",
    "gcp.gen_ai": "google",
    "gemini": "google",
    "vertex_ai": "google",
    "google_genai": "google",
    "aws.bedrock": "aws",
    "bedrock": "aws",
    "azure.ai.openai": "azure",
    "azure.ai.inference": "azure",
    "az.ai.openai": "azure",
    "az.ai.inference": "azure",
    "mistral_ai": "mistral",
    "mistralai": "mistral",
    "x_ai": "x-ai",
    "xai": "x-ai",
}


def library_provider(provider: str | None) -> str | None:
    """The genai-prices provider id for an OTel provider name (None: let the model decide)."""
    if not provider:
        return None
    key = provider.strip().lower()
    return _PROVIDER_IDS.get(key, key)


@dataclass(frozen=True, slots=True)
class _Rates:
    """A library price that is linear in the counts we pass (USD per token, plus a
    per-request price): computed here without asking the library per call."""

    input: float
    output: float
    cached: float
    per_request: float

    def cost(self, usage: TokenUsage) -> float:
        cached = usage.cached_input_tokens or 0
        return (
            ((usage.input_tokens or 0) - cached) * self.input
            + cached * self.cached
            + (usage.output_tokens or 0) * self.output
            + self.per_request
        )


# What a (model, provider, day) resolves to: linear rates, the library per call (tiered or
# otherwise non-linear prices), or unknown.
_PER_CALL: Final = "per_call"
_UNKNOWN: Final = "unknown"


class _Library:
    """genai-prices, imported on first use (~0.4 s).

    Asking the library costs ~120 us a call (it validates the usage and walks its price
    units), and a conversation has several model calls with different counts. So each
    (model, provider, day) is resolved once: when the model's price is plain per-token
    rates for what we pass (input, cache reads, output; a per-request price), the cost
    is computed here from those rates (checked against the library in
    tests/evaluator/test_pricing.py); tiered prices go to the library per call.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calc: Any = None
        self._usage: Any = None
        self._tiered: Any = None
        # (model, provider, day) → what it resolves to; (model, provider, usage, day) →
        # the library's price of one non-linear call. Both keyed by span-set names.
        self._resolved: BoundedCache[tuple[str, str | None, str], _Rates | str] = BoundedCache(
            "price_rates", max_entries=RESOLVED_ENTRIES, max_bytes=RESOLVED_BYTES
        )
        self._per_call: BoundedCache[tuple[str, str | None, TokenUsage, str], float | str] = (
            BoundedCache("price_calls", max_entries=PER_CALL_ENTRIES, max_bytes=PER_CALL_BYTES)
        )

    def _load(self) -> None:
        with self._lock:
            if self._calc is None:
                from genai_prices import Usage, calc_price
                from genai_prices.types import TieredPrices

                self._usage = Usage
                self._tiered = TieredPrices
                self._calc = calc_price

    def price(self, model: str, provider: str | None, usage: TokenUsage, day: str) -> float | None:
        key = (model, provider, day)
        found = self._resolved.get(key)
        if found is None:
            found = self._resolve(model, provider, day)
            self._resolved.put(key, found)
        if isinstance(found, _Rates):
            return found.cost(usage)
        if found == _UNKNOWN:
            return None
        call = (model, provider, usage, day)
        priced = self._per_call.get(call)
        if priced is None:
            computed = self.compute(model, provider, usage, day)
            priced = _UNKNOWN if computed is None else computed
            self._per_call.put(call, priced)
        return None if isinstance(priced, str) else priced

    def _resolve(self, model: str, provider: str | None, day: str) -> _Rates | str:
        result = self._ask(model, provider, TokenUsage(1, 1), day)
        if result is None:
            return _UNKNOWN
        fields = {
            k: v
            for k, v in vars(result.model_price).items()
            if v is not None and not k.startswith("_")
        }
        if any(isinstance(v, self._tiered) for v in fields.values()):
            return _PER_CALL
        if "input_mtok" not in fields or "output_mtok" not in fields:
            return _PER_CALL
        # Other units (audio, images, cache writes, searches) are billed only for counts
        # we never pass: the price is linear in ours.
        return _Rates(
            input=float(fields["input_mtok"]) / _PER_MTOK,
            output=float(fields["output_mtok"]) / _PER_MTOK,
            cached=float(fields.get("cache_read_mtok", fields["input_mtok"])) / _PER_MTOK,
            per_request=float(fields.get("requests_kcount", 0)) / 1000.0,
        )

    def _ask(self, model: str, provider: str | None, usage: TokenUsage, day: str) -> Any:
        if self._calc is None:
            self._load()
        counts: dict[str, int] = {
            "input_tokens": usage.input_tokens or 0,
            "output_tokens": usage.output_tokens or 0,
        }
        if usage.cached_input_tokens:
            counts["cache_read_tokens"] = usage.cached_input_tokens
        when = datetime.fromisoformat(day).replace(tzinfo=UTC)
        attempts = (provider, None) if provider else (None,)
        try:
            for provider_id in attempts:
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        return self._calc(
                            self._usage(**counts),
                            model_ref=model,
                            provider_id=provider_id,
                            genai_request_timestamp=when,
                        )
                except LookupError:
                    continue
                except (ValueError, ArithmeticError):
                    return None
            return None
        finally:
            _trim_library_memos()

    def compute(
        self, model: str, provider: str | None, usage: TokenUsage, day: str
    ) -> float | None:
        """The library's own answer for one call (no fast path)."""
        result = self._ask(model, provider, usage, day)
        if result is None:
            return None
        total = float(result.total_price)
        return total if math.isfinite(total) else None


# genai-prices memoizes every lookup in its data snapshot (`_lookup_cache`,
# `_provider_cache`, `_provider_misses`: dictionaries and a set without a bound, keyed
# by the model and provider names, so by what spans say). Past `LIBRARY_MEMO_ENTRIES`
# entries one is emptied (the library refills it from its data: it is only a memo),
# counted under `price_library` in `bounded_cache.eviction_counts()`. The names are
# read with getattr: a library version without them leaves nothing to trim (and
# tests/reliability/test_third_attack_memory.py fails if memory grows again).
LIBRARY_MEMO_ENTRIES: Final = 256
_LIBRARY_MEMOS: Final = ("_lookup_cache", "_provider_cache", "_provider_misses")


def _trim_library_memos() -> None:
    from genai_prices import data_snapshot

    snapshot = data_snapshot.get_snapshot()
    for name in _LIBRARY_MEMOS:
        memo = getattr(snapshot, name, None)
        if isinstance(memo, dict | set) and len(memo) > LIBRARY_MEMO_ENTRIES:
            gone = len(memo)
            memo.clear()
            note_evictions("price_library", gone)


# Bounds of the price caches (entries, estimated bytes): the model names that reach
# them are at most MAX_MODEL_CHARS long, so the byte bounds are rarely what binds.
RESOLVED_ENTRIES: Final = 1024
RESOLVED_BYTES: Final = 1024 * 1024
PER_CALL_ENTRIES: Final = 4096
PER_CALL_BYTES: Final = 4 * 1024 * 1024

_LIBRARY: Final = _Library()
# A model (or provider) name longer than this is not looked up in the library (no real
# one comes close): the names are the keys of the price caches, and a span sets them;
# with unique 1 MB names those caches grew ~1 MB per span (issue 33). Such a call is
# `unknown_model` unless `pricing.models` names it.
MAX_MODEL_CHARS: Final = 256


_DAY_NS: Final = 86_400 * 10**9
_DAYS: dict[int, str] = {}


def _day_of(at_ns: int | None) -> str:
    """The UTC date of `at_ns` (epoch ns; None or unusable: today), ISO formatted; one
    conversion per distinct day (model calls of a day share it)."""
    if at_ns is None or at_ns <= 0 or at_ns > 253_402_300_799 * 10**9:  # after 9999-12-31
        return datetime.now(tz=UTC).date().isoformat()
    day = at_ns // _DAY_NS
    text = _DAYS.get(day)
    if text is None:
        if len(_DAYS) >= 4096:
            _DAYS.clear()
        text = _DAYS[day] = datetime.fromtimestamp(day * 86_400, tz=UTC).date().isoformat()
    return text


class PriceBook:
    """Prices for model calls: `overrides` (the config's `pricing.models`) win over the
    library; `use_library=False` prices configured models only."""

    def __init__(
        self, overrides: Mapping[str, ModelPrice] | None = None, *, use_library: bool = True
    ) -> None:
        self._overrides = dict(overrides or {})
        self._lowered = {name.lower(): price for name, price in self._overrides.items()}
        self._use_library = use_library

    @property
    def overrides(self) -> Mapping[str, ModelPrice]:
        return self._overrides

    def price(
        self,
        model: str | None,
        usage: TokenUsage,
        *,
        provider: str | None = None,
        at_ns: int | None = None,
    ) -> Priced:
        """The cost of one call of `model` with `usage` at `at_ns` (epoch ns; prices have a
        history; None: today), or why it has none."""
        if not model:
            return Priced(None, MISSING_MODEL)
        problem = usage.problem()
        if problem is not None:
            return Priced(None, problem)
        configured = self._overrides.get(model) or self._lowered.get(model.lower())
        if configured is not None:
            return Priced(configured.cost(usage), None, SOURCE_CONFIG)
        if self._use_library and len(model) <= MAX_MODEL_CHARS:
            lib_provider = library_provider(provider)
            if lib_provider is not None and len(lib_provider) > MAX_MODEL_CHARS:
                lib_provider = None
            found = _LIBRARY.price(model, lib_provider, usage, _day_of(at_ns))
            if found is not None:
                return Priced(found, None, SOURCE_LIBRARY)
        return Priced(None, UNKNOWN_MODEL)

    def cost_usd(
        self,
        model: str | None,
        usage: TokenUsage,
        *,
        provider: str | None = None,
        at_ns: int | None = None,
    ) -> float | None:
        """`price(...).cost_usd`: the USD figure, or None when it is not known."""
        return self.price(model, usage, provider=provider, at_ns=at_ns).cost_usd


_DEFAULT_BOOK: Final = PriceBook()


def cost_usd(
    model: str | None,
    usage: TokenUsage,
    *,
    provider: str | None = None,
    overrides: Mapping[str, ModelPrice] | None = None,
    at_ns: int | None = None,
) -> float | None:
    """USD for one model call, or None (unknown model, missing or invalid counts).

    `overrides` are the config's `pricing.models` (a caller pricing many calls should keep
    one `PriceBook` instead of passing them each time).
    """
    book = _DEFAULT_BOOK if not overrides else PriceBook(overrides)
    return book.cost_usd(model, usage, provider=provider, at_ns=at_ns)
