"""Conversation sampling follows the documented formula exactly, and rules pick the rate."""

from __future__ import annotations

import hashlib

from hypothesis import given
from hypothesis import strategies as st

from tracepass.evaluator.stats.conversation_sampling import (
    SamplingPolicy,
    SamplingRule,
    keep_conversation,
)


def _contract(conversation_id: str, rate: float, seed: str) -> bool:
    # The formula as docs/configuration.md states it, written out independently.
    digest = hashlib.sha256(f"{seed}:{conversation_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") < rate * 2**64


def test_rate_0_3_keeps_exactly_what_the_formula_keeps_on_10000_ids() -> None:
    ids = [f"conv-{n}" for n in range(10_000)]
    policy = SamplingPolicy(rate=0.3, seed="s1")
    kept = [i for i in ids if policy.keep(i)]
    assert kept == [i for i in ids if _contract(i, 0.3, "s1")]
    # A simple random sample: 3,000 expected, sd ≈ 46; 5 sd either side.
    assert 2_770 < len(kept) < 3_230


def test_seed_changes_the_sample_and_replicas_agree() -> None:
    ids = [f"c{n}" for n in range(2_000)]
    a = {i for i in ids if SamplingPolicy(0.5, seed="a").keep(i)}
    b = {i for i in ids if SamplingPolicy(0.5, seed="b").keep(i)}
    replica = {i for i in ids if SamplingPolicy(0.5, seed="a").keep(i)}
    assert a == replica
    assert a != b


@given(st.text(max_size=40), st.floats(0, 1), st.floats(0, 1), st.text(max_size=8))
def test_keep_is_the_contract_and_monotone_in_rate(
    conversation_id: str, r1: float, r2: float, seed: str
) -> None:
    low, high = sorted((r1, r2))
    assert keep_conversation(conversation_id, low, seed) == _contract(conversation_id, low, seed)
    if keep_conversation(conversation_id, low, seed):
        assert keep_conversation(conversation_id, high, seed)


def test_rate_bounds() -> None:
    assert all(SamplingPolicy(1.0).keep(f"x{n}") for n in range(500))
    assert not any(SamplingPolicy(0.0).keep(f"x{n}") for n in range(500))


def test_first_matching_rule_wins_and_unknown_fields_do_not_match() -> None:
    policy = SamplingPolicy(
        rate=1.0,
        rules=(
            SamplingRule(rate=0.1, agent_name="travel-*"),
            SamplingRule(rate=1.0, agent_version="*-canary"),
            SamplingRule(rate=0.5, reference_set="support"),
        ),
    )
    assert policy.rate_for("travel-agent", "2.0-canary") == 0.1
    assert policy.rate_for("other", "2.0-canary") == 1.0
    assert policy.rate_for("other", "2.0", "support") == 0.5
    assert policy.rate_for(None, None, None) == 1.0
    assert policy.max_rate == 1.0


def test_could_keep_is_false_only_when_no_rule_could_keep() -> None:
    policy = SamplingPolicy(rate=0.2, rules=(SamplingRule(rate=0.6, agent_name="a*"),))
    for n in range(3_000):
        cid = f"id-{n}"
        if not policy.could_keep(cid):
            assert not policy.keep(cid, "alpha")
            assert not policy.keep(cid, "zeta")
        if policy.keep(cid, "alpha") or policy.keep(cid, "zeta"):
            assert policy.could_keep(cid)


def test_scale_lowers_the_threshold_on_the_same_hash() -> None:
    policy = SamplingPolicy(rate=0.8)
    ids = [f"j{n}" for n in range(3_000)]
    half = {i for i in ids if policy.keep(i, scale=0.5)}
    assert half == {i for i in ids if _contract(i, 0.4, "")}
    assert half <= {i for i in ids if policy.keep(i)}
