"""Model-call prices: configured rates, the genai-prices library, and no guesses."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from tracepass.evaluator.pricing import (
    INVALID_USAGE,
    MISSING_MODEL,
    MISSING_TOKENS,
    UNKNOWN_MODEL,
    ModelPrice,
    PriceBook,
    TokenUsage,
    cost_usd,
    library_provider,
)

# 2024-11-01 (epoch ns): a day whose gpt-4o list price is $2.50 in / $10 out / $1.25 cached.
NOV_2024_NS = 1_730_419_200 * 10**9


def test_library_prices_a_known_model_from_its_list_price() -> None:
    usage = TokenUsage(input_tokens=1_000_000, output_tokens=100_000)
    priced = PriceBook().price("gpt-4o", usage, provider="openai", at_ns=NOV_2024_NS)
    assert priced.source == "genai-prices"
    assert priced.cost_usd == pytest.approx(2.5 + 1.0)


def test_library_applies_the_cached_input_rate() -> None:
    usage = TokenUsage(input_tokens=1_000_000, output_tokens=0, cached_input_tokens=1_000_000)
    assert cost_usd("gpt-4o", usage, provider="openai", at_ns=NOV_2024_NS) == pytest.approx(1.25)


def test_unknown_model_has_no_cost_and_says_why() -> None:
    priced = PriceBook().price("no-such-model-xyz", TokenUsage(10, 10))
    assert priced.cost_usd is None
    assert priced.reason == UNKNOWN_MODEL


def test_unknown_provider_falls_back_to_the_model_name() -> None:
    usage = TokenUsage(input_tokens=1_000_000, output_tokens=0)
    assert cost_usd("gpt-4o", usage, provider="some.gateway", at_ns=NOV_2024_NS) == (
        pytest.approx(2.5)
    )


def test_otel_provider_names_map_to_library_ids() -> None:
    assert library_provider("gcp.gemini") == "google"
    assert library_provider("aws.bedrock") == "aws"
    assert library_provider("OpenAI") == "openai"
    assert library_provider(None) is None


def test_configured_price_wins_over_the_library() -> None:
    book = PriceBook({"gpt-4o": ModelPrice(input_per_mtok=1.0, output_per_mtok=2.0)})
    priced = book.price("gpt-4o", TokenUsage(input_tokens=500_000, output_tokens=250_000))
    assert priced.source == "config"
    assert priced.cost_usd == pytest.approx(0.5 + 0.5)


def test_configured_price_for_a_model_the_library_does_not_know() -> None:
    book = PriceBook(
        {
            "my-finetune": ModelPrice(
                input_per_mtok=3.0,
                output_per_mtok=6.0,
                cached_input_per_mtok=0.3,
                reasoning_per_mtok=12.0,
            )
        }
    )
    usage = TokenUsage(
        input_tokens=1_000_000,
        output_tokens=1_000_000,
        cached_input_tokens=400_000,
        reasoning_tokens=250_000,
    )
    # 600k fresh input at 3 + 400k cached at 0.3 + 750k output at 6 + 250k reasoning at 12
    assert book.cost_usd("my-finetune", usage) == pytest.approx(1.8 + 0.12 + 4.5 + 3.0)


def test_omitted_cached_and_reasoning_rates_default_to_input_and_output() -> None:
    price = ModelPrice(input_per_mtok=2.0, output_per_mtok=8.0)
    with_detail = TokenUsage(1_000_000, 1_000_000, cached_input_tokens=10, reasoning_tokens=10)
    assert price.cost(with_detail) == pytest.approx(price.cost(TokenUsage(1_000_000, 1_000_000)))


@pytest.mark.parametrize(
    ("usage", "reason"),
    [
        (TokenUsage(input_tokens=-1, output_tokens=5), INVALID_USAGE),
        (TokenUsage(input_tokens=5, output_tokens=5, cached_input_tokens=6), INVALID_USAGE),
        (TokenUsage(input_tokens=5, output_tokens=5, reasoning_tokens=6), INVALID_USAGE),
        (TokenUsage(input_tokens=5), MISSING_TOKENS),
        (TokenUsage(output_tokens=5), MISSING_TOKENS),
    ],
)
def test_bad_or_missing_counts_get_no_cost(usage: TokenUsage, reason: str) -> None:
    book = PriceBook({"m": ModelPrice(input_per_mtok=1, output_per_mtok=1)})
    priced = book.price("m", usage)
    assert (priced.cost_usd, priced.reason) == (None, reason)


def test_missing_model_gets_no_cost() -> None:
    assert PriceBook().price(None, TokenUsage(1, 1)).reason == MISSING_MODEL
    assert cost_usd("", TokenUsage(1, 1)) is None


def test_negative_or_infinite_configured_rates_are_rejected() -> None:
    with pytest.raises(ValidationError):
        ModelPrice(input_per_mtok=-1, output_per_mtok=1)
    with pytest.raises(ValidationError):
        ModelPrice(input_per_mtok=math.inf, output_per_mtok=1)
    with pytest.raises(ValidationError):
        ModelPrice.model_validate({"input_per_mtok": 1, "output_per_mtok": 1, "typo": 1})


def test_library_off_prices_configured_models_only() -> None:
    book = PriceBook(use_library=False)
    assert book.price("gpt-4o", TokenUsage(1, 1)).reason == UNKNOWN_MODEL


counts = st.integers(min_value=0, max_value=10**9)


@given(counts, counts, st.floats(0, 100), st.floats(0, 100), st.floats(0, 1), st.floats(0, 1))
def test_configured_cost_is_linear_in_the_counts(
    input_tokens: int,
    output_tokens: int,
    input_rate: float,
    output_rate: float,
    cached_share: float,
    reasoning_share: float,
) -> None:
    cached = int(input_tokens * cached_share)
    reasoning = int(output_tokens * reasoning_share)
    price = ModelPrice(input_per_mtok=input_rate, output_per_mtok=output_rate)
    usage = TokenUsage(input_tokens, output_tokens, cached, reasoning)
    expected = (input_tokens * input_rate + output_tokens * output_rate) / 1e6
    got = PriceBook({"m": price}).cost_usd("m", usage)
    assert got is not None
    assert got >= 0
    assert got == pytest.approx(expected, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize(
    ("model", "provider"),
    [
        ("gpt-4o", "openai"),
        ("gpt-4o-mini", None),
        ("o3-mini", "openai"),
        ("claude-3-5-sonnet-20241022", "anthropic"),
        ("claude-3-5-haiku-latest", None),
        ("gemini-2.5-pro", "gcp.gemini"),  # tiered: asked per call
        ("gemini-2.0-flash", None),
        ("anthropic.claude-3-haiku-20240307-v1:0", "aws.bedrock"),
    ],
)
@pytest.mark.parametrize(
    "usage",
    [
        TokenUsage(input_tokens=1234, output_tokens=567),
        TokenUsage(input_tokens=300_000, output_tokens=9, cached_input_tokens=250_000),
        TokenUsage(input_tokens=0, output_tokens=0),
    ],
)
def test_fast_rates_equal_the_library_answer(
    model: str, provider: str | None, usage: TokenUsage
) -> None:
    """Resolved per-token rates give the library's own figure for any counts."""
    from tracepass.evaluator.pricing import _LIBRARY, library_provider

    day = "2026-11-01"
    fast = _LIBRARY.price(model, library_provider(provider), usage, day)
    slow = _LIBRARY.compute(model, library_provider(provider), usage, day)
    assert slow is not None
    assert fast == pytest.approx(slow, rel=1e-9, abs=1e-15)
