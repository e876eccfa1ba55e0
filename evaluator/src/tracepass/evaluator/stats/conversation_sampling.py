"""Consistent sampling of whole conversations: which conversations are evaluated.

The decision is a pure function of the conversation id (and a seed), never of what the
conversation contains or how it scored, for two reasons:

* every span of a conversation, every replica of the collector and every restart reach
  the same decision with no coordination, and any other tool can reproduce it;
* the kept conversations are a simple random sample of the traffic each rule covers, so
  pass@k / pass^k estimated on the sample are unbiased estimates of the whole traffic's;
  only their intervals widen (the exported `n` is the sample's). A policy such as
  "always keep failures" would need the outcome before the decision and would bias every
  estimator towards failure, which is why it is not offered.

The contract (documented in docs/configuration.md, do not change it):

    keep iff int.from_bytes(sha256(f"{seed}:{conversation_id}".encode()).digest()[:8],
                            "big") < rate * 2**64

Rules choose the rate: the first rule whose globs all match the conversation's agent
name / agent version / reference set wins, else the default rate. A rule field that is
not known for the conversation (no agent name seen yet, no explicit reference id) does
not match.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass
from fnmatch import fnmatchcase

__all__ = ["SamplingPolicy", "SamplingRule", "conversation_hash", "keep_conversation"]

_TWO_64 = 2**64


def conversation_hash(conversation_id: str, seed: str = "") -> int:
    """The 64-bit number the sampling contract compares with `rate * 2**64`."""
    digest = hashlib.sha256(f"{seed}:{conversation_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def keep_conversation(conversation_id: str, rate: float, seed: str = "") -> bool:
    """The sampling contract, spelled once."""
    return conversation_hash(conversation_id, seed) < rate * _TWO_64


@dataclass(frozen=True, slots=True)
class SamplingRule:
    """A rate for the conversations whose fields match every glob given (None: any)."""

    rate: float
    agent_name: str | None = None
    agent_version: str | None = None
    reference_set: str | None = None

    def matches(
        self, agent_name: str | None, agent_version: str | None, reference_set: str | None
    ) -> bool:
        return (
            _glob(self.agent_name, agent_name)
            and _glob(self.agent_version, agent_version)
            and _glob(self.reference_set, reference_set)
        )


def _glob(pattern: str | None, value: str | None) -> bool:
    if pattern is None:
        return True
    return value is not None and fnmatchcase(value, pattern)


class SamplingPolicy:
    """Rates by rule, decisions by the contract, with the hashes of recent ids cached.

    The cache is why a dropped span costs a dict lookup, not a SHA-256: a conversation's
    spans arrive close together. `max_rate` lets the receiving path drop a span at once
    when no rule could keep its conversation, even before the conversation's agent is
    known.
    """

    def __init__(
        self,
        rate: float = 1.0,
        seed: str = "",
        rules: tuple[SamplingRule, ...] = (),
        *,
        cache_size: int = 65_536,
    ) -> None:
        if not 0.0 <= rate <= 1.0 or any(not 0.0 <= r.rate <= 1.0 for r in rules):
            raise ValueError("sampling rates must be between 0 and 1")
        self.rate = rate
        self.seed = seed
        self.rules = rules
        self.max_rate = max([rate, *(r.rate for r in rules)])
        self.keeps_everything = rate >= 1.0 and all(r.rate >= 1.0 for r in rules)
        self._hashes: OrderedDict[str, int] = OrderedDict()
        self._cache_size = cache_size

    def rate_for(
        self,
        agent_name: str | None = None,
        agent_version: str | None = None,
        reference_set: str | None = None,
    ) -> float:
        for rule in self.rules:
            if rule.matches(agent_name, agent_version, reference_set):
                return rule.rate
        return self.rate

    def hash_of(self, conversation_id: str) -> int:
        hashes = self._hashes
        value = hashes.get(conversation_id)
        if value is None:
            value = conversation_hash(conversation_id, self.seed)
            hashes[conversation_id] = value
            if len(hashes) > self._cache_size:
                hashes.popitem(last=False)
        return value

    def could_keep(self, conversation_id: str) -> bool:
        """False when no rule's rate could keep this conversation: drop its spans now."""
        return self.keeps_everything or self.hash_of(conversation_id) < self.max_rate * _TWO_64

    def keep(
        self,
        conversation_id: str,
        agent_name: str | None = None,
        agent_version: str | None = None,
        reference_set: str | None = None,
        *,
        scale: float = 1.0,
    ) -> bool:
        """The final decision; `scale` (≤ 1) lowers the threshold (adaptive judge share)."""
        if self.keeps_everything and scale >= 1.0:
            return True
        rate = self.rate_for(agent_name, agent_version, reference_set) * scale
        return self.hash_of(conversation_id) < rate * _TWO_64
